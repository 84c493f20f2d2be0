// The model description and the architecture registry: what the generic config reading and each
// family make of real config.json files, and what the engine refuses, by config key.
#include <gtest/gtest.h>

#include <cmath>

#include "keel/arch/family.h"
#include "keel/arch/model_loader.h"
#include "keel/arch/synth.h"
#include "keel/model/config_view.h"
#include "keel/util/error.h"
#include "test_support.h"

namespace {

using namespace keel;

ConfigView model_config(const std::string& name) {
  return ConfigView::load(test::shared_dir() / "models" / name / "config.json");
}
ConfigView fixture_config(const std::string& name) {
  return ConfigView::load(test::shared_dir() / "fixtures/configs" / name / "config.json");
}

std::string refusal(const ConfigView& config) {
  try {
    arch::runnable_spec(config);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ArchFamily, RegistryFindsEachFamilyByModelType) {
  for (const char* type : {"llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "gemma3_text"}) {
    const arch::Family* f = arch::find_family(type);
    ASSERT_NE(f, nullptr) << type;
    EXPECT_EQ(f->model_type, type);
  }
  EXPECT_EQ(arch::find_family("gpt2"), nullptr);
  EXPECT_EQ(arch::family_list(), "gemma3_text, llama, mistral, qwen2, qwen3, qwen3_moe");
}

TEST(ArchFamily, DenseQwenLayersFollowTheirFamily) {
  const ModelSpec qwen2 = arch::runnable_spec(model_config("tiny-toolcaller"));
  ASSERT_EQ(qwen2.layers.size(), static_cast<size_t>(qwen2.num_layers));
  for (const LayerSpec& l : qwen2.layers) {
    EXPECT_EQ(l.attention, AttentionKind::Full);
    EXPECT_TRUE(l.qkv_bias);  // Qwen2 always has q/k/v bias, though config.json does not say so
    EXPECT_FALSE(l.o_bias);
    EXPECT_FALSE(l.qk_norm);
    EXPECT_DOUBLE_EQ(l.attention_scale, 1.0 / std::sqrt(static_cast<double>(l.head_dim)));
  }
  const ModelSpec qwen3 = arch::runnable_spec(model_config("tiny-qwen3-random"));
  for (const LayerSpec& l : qwen3.layers) {
    EXPECT_TRUE(l.qk_norm);
    EXPECT_FALSE(l.qkv_bias);
  }
}

TEST(ArchFamily, Gemma3TextSpec) {
  const ModelSpec s = arch::runnable_spec(model_config("tiny-gemma3-random"));
  EXPECT_EQ(s.norm, NormKind::RmsUnitOffset);
  EXPECT_DOUBLE_EQ(s.embedding_scale, std::sqrt(64.0));
  ASSERT_EQ(s.layers.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    const LayerSpec& l = s.layers[i];
    EXPECT_TRUE(l.sandwich_norms && l.qk_norm);
    EXPECT_EQ(l.activation, Activation::GeluTanh);
    EXPECT_DOUBLE_EQ(l.attention_scale, 1.0 / std::sqrt(16.0));  // query_pre_attn_scalar, not head_dim 32
    if (i < 5) {
      EXPECT_EQ(l.attention, AttentionKind::Sliding);
      EXPECT_EQ(l.window, 8);
      EXPECT_EQ(l.rope.theta, 10000.0);  // rope_local_base_freq, unscaled
      EXPECT_EQ(l.rope.scaling.kind, RopeScaling::Kind::None);
    } else {
      EXPECT_EQ(l.attention, AttentionKind::Full);
      EXPECT_EQ(l.rope.theta, 1000000.0);
      EXPECT_EQ(l.rope.scaling.kind, RopeScaling::Kind::Linear);
      EXPECT_EQ(l.rope.scaling.factor, 8.0);
    }
  }
}

TEST(ArchFamily, NestedTextConfigIsRead) {
  // medgemma-27b is a multimodal Gemma 3 folder: the language model lives under text_config.
  const ModelSpec s = arch::describe_spec(fixture_config("medgemma-27b-it-gemma3"));
  EXPECT_EQ(s.model_type, "gemma3_text");
  EXPECT_EQ(s.norm, NormKind::RmsUnitOffset);  // refined by the gemma3_text family
  EXPECT_GT(s.num_layers, 0);
  int64_t sliding = 0;
  for (const LayerSpec& l : s.layers) sliding += l.attention == AttentionKind::Sliding;
  EXPECT_GT(sliding, 0);
}

TEST(ArchFamily, UnsupportedFeaturesAreRefusedByConfigKey) {
  EXPECT_NE(refusal(model_config("tiny-qwen3next-random")).find("model_type 'qwen3_next' is not supported"),
            std::string::npos);
  EXPECT_NE(refusal(model_config("tiny-gptoss-random")).find("model_type 'gpt_oss' is not supported"), std::string::npos);
  // Known family, unsupported feature: the message names the key.
  ConfigView moe(nlohmann::json::parse(test::read_text(test::shared_dir() / "models/tiny-qwen3-random/config.json")),
                 "config.json");
  nlohmann::json j = moe.root();
  j["num_experts"] = 8;
  j["num_experts_per_tok"] = 2;
  EXPECT_NE(refusal(ConfigView(j, "config.json")).find("key 'num_experts': a mixture-of-experts FFN in qwen3 is not supported yet"),
            std::string::npos);
  j = moe.root();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_NE(refusal(ConfigView(j, "config.json")).find("rope_scaling type 'yarn' is not supported"), std::string::npos);
  j = moe.root();
  j["kv_lora_rank"] = 512;
  j["qk_rope_head_dim"] = 64;
  EXPECT_NE(refusal(ConfigView(j, "config.json")).find("key 'kv_lora_rank'"), std::string::npos);
}

TEST(ArchFamily, Qwen3MoeLayersAndMlxOverrides) {
  const ModelSpec s = arch::runnable_spec(model_config("tiny-qwen3moe-random"));
  ASSERT_EQ(s.layers.size(), 3u);
  for (size_t i : {0u, 2u}) {
    ASSERT_TRUE(s.layers[i].moe.has_value()) << i;
    EXPECT_EQ(s.layers[i].moe->experts, 8);
    EXPECT_EQ(s.layers[i].moe->experts_per_token, 2);
    EXPECT_EQ(s.layers[i].moe->expert_ffn_dim, 128);
    EXPECT_TRUE(s.layers[i].moe->norm_topk_prob);
    EXPECT_TRUE(s.layers[i].qk_norm);
  }
  EXPECT_FALSE(s.layers[1].moe.has_value());  // mlp_only_layers: [1]
  EXPECT_EQ(s.layers[1].ffn_dim, 192);

  const ModelSpec mlx = arch::runnable_spec(model_config("tiny-qwen3moe-random-mlx4"));
  ASSERT_TRUE(mlx.quantization.has_value());
  EXPECT_EQ(mlx.quantization->bits, 4);
  ASSERT_EQ(mlx.quantization_overrides.count("model.layers.0.mlp.gate"), 1u);
  EXPECT_EQ(mlx.quantization_overrides.at("model.layers.0.mlp.gate").bits, 8);  // the router stays at 8 bits
}

// keel synth writes the experts under the names the loader reads; a decode step streams only the
// experts a token is routed to.
TEST(ArchFamily, SynthesizedMoeLoadsAndCountsActiveBytes) {
  test::TempDir dir;
  const auto config = test::shared_dir() / "models/tiny-qwen3moe-random/config.json";
  for (WeightFormat format : {WeightFormat::BF16, WeightFormat::MLX4}) {
    const auto out = dir.path() / weight_format_name(format);
    SynthOptions o;
    o.format = format;
    synthesize_model(config, out, o);
    const ModelWeights w = arch::load_model(out);
    ASSERT_EQ(w.layers.size(), 3u);
    ASSERT_EQ(w.layers[0].experts.size(), 8u);
    EXPECT_TRUE(w.layers[1].experts.empty());  // the dense layer
    EXPECT_EQ(w.layers[0].experts[7].down.format, format);
    size_t all_experts = 0, one_expert = 0;
    for (const auto& e : w.layers[0].experts) all_experts += e.gate.stored_bytes() + e.up.stored_bytes() + e.down.stored_bytes();
    one_expert = all_experts / 8;
    size_t dense_total = w.output().stored_bytes();
    for (const auto& l : w.layers)
      for (const Matrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down, &l.router}) dense_total += m->stored_bytes();
    EXPECT_EQ(w.weight_bytes_per_token(), dense_total + 2 * 2 * one_expert);  // 2 MoE layers, top-2 of 8
  }
}

TEST(ArchFamily, PlanDescribesWhatServeRefuses) {
  // describe_spec never refuses a feature: keel plan sizes models keel cannot run yet.
  const ModelSpec next = arch::describe_spec(fixture_config("Qwen3-Next-80B-A3B-Thinking"));
  int64_t linear = 0;
  for (const LayerSpec& l : next.layers) linear += l.attention == AttentionKind::Linear;
  EXPECT_GT(linear, 0);
  const ModelSpec moe = arch::describe_spec(fixture_config("Qwen3-30B-A3B"));
  ASSERT_TRUE(moe.layers.front().moe.has_value());
  EXPECT_EQ(moe.layers.front().moe->experts, 128);
  EXPECT_EQ(moe.layers.front().moe->experts_per_token, 8);
}

}  // namespace
