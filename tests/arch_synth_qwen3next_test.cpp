// keel synth for Qwen3-Next (arch/synth.h, over arch::checkpoint_tensors): the folder holds exactly
// the tensors the loader reads (Gated DeltaNet layers, gated q_proj, shared expert and its gate),
// in bf16 and MLX; the linear layers' vectors are filled as the model initializes them (decay rates
// exp(A_log) in [1, 16], small dt_bias and conv taps, a unit output norm); and --layers keeps each
// kept layer's kind and dense FFN.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "keel/arch/checkpoint_tensors.h"
#include "keel/arch/family.h"
#include "keel/arch/model_loader.h"
#include "keel/arch/synth.h"
#include "keel/model/safetensors.h"
#include "keel/plan/weight_storage.h"
#include "test_support.h"

namespace keel {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path tiny_config() { return test::shared_dir() / "models/tiny-qwen3next-random/config.json"; }

// The header's tensors against the loader's list stored in `format`: the same names, shapes and bytes.
void expect_header_is_the_list(const fs::path& dir, const plan::StorageFormat& format) {
  const ModelWeights w = arch::load_model(dir);  // and the loader takes it
  const auto list = arch::checkpoint_tensors(w.spec, arch::find_family(w.spec.model_type)->tensor_names());
  std::map<std::string, plan::StoredTensor> expected;
  for (auto& t : plan::stored_tensors(list, format, w.spec.quantization_overrides)) expected[t.name] = t;
  const SafetensorsHeader h = read_safetensors_header(dir / "model.safetensors");
  EXPECT_EQ(h.tensors.size(), expected.size());
  for (const auto& t : h.tensors) {
    const auto it = expected.find(t.name);
    ASSERT_NE(it, expected.end()) << t.name << " is in the file, not in the loader's list";
    EXPECT_EQ(t.shape, it->second.shape) << t.name;
    EXPECT_EQ(t.byte_size(), it->second.bytes) << t.name;
  }
}

TEST(SynthQwen3Next, WritesExactlyTheTensorsTheLoaderReads) {
  test::TempDir dir;
  synthesize_model(tiny_config(), dir.path() / "bf16", SynthOptions{});
  expect_header_is_the_list(dir.path() / "bf16", plan::StorageFormat{});
  // The experts' input (moe_intermediate_size 32) needs MLX groups of 32.
  synthesize_model(tiny_config(), dir.path() / "mlx4", SynthOptions{.format = WeightFormat::MLX4, .mlx_group_size = 32});
  expect_header_is_the_list(dir.path() / "mlx4", plan::StorageFormat{plan::StorageFormat::Kind::MlxAffine, 2, false, 4, 32});
}

TEST(SynthQwen3Next, FillsTheLayersAsTheModelInitializesThem) {
  test::TempDir dir;
  synthesize_model(tiny_config(), dir.path(), SynthOptions{});
  const ModelWeights w = arch::load_model(dir.path());
  ASSERT_EQ(w.layers.size(), 5u);
  int linear = 0;
  for (size_t i = 0; i < w.layers.size(); ++i) {
    SCOPED_TRACE("layer " + std::to_string(i));
    const LayerSpec& ls = w.spec.layers[i];
    const LayerWeights& l = w.layers[i];
    if (ls.attention == AttentionKind::Linear) {
      ++linear;
      const LinearAttentionDims& a = *ls.linear;
      ASSERT_EQ(l.linear.decay.size(), static_cast<size_t>(a.value_heads));
      // decay = -exp(A_log): rates in [1, 16] (bf16 rounding of A_log allows a little more), not all alike.
      for (float d : l.linear.decay) {
        EXPECT_LE(d, -0.99f);
        EXPECT_GE(d, -16.2f);
      }
      EXPECT_NE(*std::min_element(l.linear.decay.begin(), l.linear.decay.end()),
                *std::max_element(l.linear.decay.begin(), l.linear.decay.end()));
      // dt_bias and the conv taps: small (+-0.1, bf16-rounded), not zero.
      for (const std::vector<float>* small : {&l.linear.dt_bias, &l.linear.conv}) {
        float largest = 0;
        for (float v : *small) largest = std::max(largest, std::abs(v));
        EXPECT_LE(largest, 0.101f);
        EXPECT_GT(largest, 0.0f);
      }
      EXPECT_EQ(l.linear.conv.size(), static_cast<size_t>((2 * a.key_heads * a.key_head_dim + a.value_heads * a.value_head_dim) *
                                                         a.conv_kernel));
      EXPECT_EQ(l.linear.norm, std::vector<float>(static_cast<size_t>(a.value_head_dim), 1.0f));
      EXPECT_EQ(l.wq.rows, 0);
    } else {
      EXPECT_TRUE(ls.gated_attention);
      EXPECT_EQ(l.wq.rows, 2 * ls.q_dim());  // each head's query and its output gate
    }
    if (ls.moe) {
      EXPECT_EQ(l.experts.size(), 8u);
      EXPECT_EQ(l.shared_expert.gate.rows, 96);
      EXPECT_EQ(l.shared_expert.down.cols, 96);
      EXPECT_EQ(l.shared_expert_gate.rows, 1);
      EXPECT_EQ(l.shared_expert_gate.cols, w.spec.hidden_size);
    } else {
      EXPECT_EQ(i, 1u);  // mlp_only_layers: [1]
      EXPECT_EQ(l.gate.rows, 160);
    }
  }
  EXPECT_EQ(linear, 4);  // full attention every 4th layer
}

// --layers keeps the first layers as they were: the kinds full_attention_interval gives them, and
// mlp_only_layers without the layers that are gone.
TEST(SynthQwen3Next, LayersKeepsTheKeptLayersKinds) {
  test::TempDir dir;
  const auto synth = [&](int64_t layers) {
    const fs::path out = dir.path() / std::to_string(layers);
    synthesize_model(tiny_config(), out, SynthOptions{.layers = layers});
    return out;
  };
  const fs::path four = synth(4);
  const json c4 = json::parse(std::ifstream(four / "config.json"));
  EXPECT_EQ(c4["num_hidden_layers"], 4);
  EXPECT_EQ(c4["full_attention_interval"], 4);
  EXPECT_EQ(c4["mlp_only_layers"], json::array({1}));
  const ModelWeights w = arch::load_model(four);
  ASSERT_EQ(w.layers.size(), 4u);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_EQ(w.spec.layers[i].attention, i == 3 ? AttentionKind::Full : AttentionKind::Linear) << i;
  EXPECT_FALSE(w.spec.layers[1].moe.has_value());
  EXPECT_TRUE(w.spec.layers[2].moe.has_value());

  const json c1 = json::parse(std::ifstream(synth(1) / "config.json"));
  EXPECT_EQ(c1["num_hidden_layers"], 1);
  EXPECT_EQ(c1["mlp_only_layers"], json::array());
}

}  // namespace
}  // namespace keel
