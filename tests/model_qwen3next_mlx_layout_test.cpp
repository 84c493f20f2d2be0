// mlx-lm's conversion of a Qwen3-Next checkpoint (its sanitize()) moves the conv weight's kernel
// axis, (channels, 1, kernel) -> (channels, kernel, 1), and stores the (1 + w) norms with the one
// added. keel reads such a folder as the model it came from: here tiny-qwen3next-random rewritten
// that way loads with the same conv taps and, up to the bf16 rounding of 1 + w, the same norms and logits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "keel/arch/model_loader.h"
#include "keel/arch/transformer.h"
#include "keel/engine/forward_loop.h"
#include "keel/engine/standalone_sequence.h"
#include "keel/util/half.h"
#include "test_support.h"

namespace keel {
namespace {

bool is_offset_norm(const std::string& name) {
  for (const char* suffix : {".input_layernorm.weight", ".post_attention_layernorm.weight", "model.norm.weight",
                             ".q_norm.weight", ".k_norm.weight"})
    if (name.ends_with(suffix)) return true;
  return false;
}

// tiny-qwen3next-random as mlx-lm would write it, into `dir`.
void write_mlx_lm_layout(const std::filesystem::path& dir) {
  const auto src = test::shared_dir() / "models/tiny-qwen3next-random";
  std::filesystem::copy_file(src / "config.json", dir / "config.json");
  const std::string file = test::read_text(src / "model.safetensors");
  uint64_t header_size = 0;
  std::memcpy(&header_size, file.data(), 8);
  nlohmann::json header = nlohmann::json::parse(file.substr(8, header_size));
  std::string data = file.substr(8 + header_size);
  for (auto& [name, t] : header.items()) {
    if (name == "__metadata__") continue;
    if (name.ends_with("conv1d.weight")) {
      const auto shape = t["shape"].get<std::vector<int64_t>>();
      t["shape"] = {shape[0], shape[2], shape[1]};
    }
    if (!is_offset_norm(name)) continue;
    ASSERT_EQ(t["dtype"], "BF16") << name;
    const auto range = t["data_offsets"].get<std::vector<size_t>>();
    for (size_t at = range[0]; at < range[1]; at += 2) {
      uint16_t bits;
      std::memcpy(&bits, data.data() + at, 2);
      bits = float_to_bf16(bf16_to_float(bits) + 1.0f);
      std::memcpy(data.data() + at, &bits, 2);
    }
  }
  test::write_safetensors(dir / "model.safetensors", header.dump(), data);
}

std::vector<float> last_logits(const ModelWeights& w, const std::vector<int32_t>& tokens) {
  ThreadPool pool(2);
  Transformer model(w, pool);
  StandaloneSequence seq(w.spec, static_cast<int64_t>(tokens.size()) + 1);
  std::vector<float> logits(static_cast<size_t>(w.spec.vocab_size));
  const int64_t row = static_cast<int64_t>(tokens.size()) - 1;
  forward_tokens(model, seq.sequence(), tokens, std::vector<chat::Role>(tokens.size(), chat::Role::user),
                 std::span(&row, 1), logits);
  return logits;
}

TEST(ModelQwen3NextMlxLayout, LoadsAsTheModelItCameFrom) {
  test::TempDir dir;
  write_mlx_lm_layout(dir.path());
  const ModelWeights hf = arch::load_model(test::shared_dir() / "models/tiny-qwen3next-random");
  const ModelWeights mlx = arch::load_model(dir.path());
  ASSERT_EQ(hf.layers.size(), mlx.layers.size());
  auto close = [](const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (std::abs(a[i] - b[i]) > 1.0f / 128) return false;  // bf16 spacing just above 1
    return true;
  };
  EXPECT_TRUE(close(hf.final_norm, mlx.final_norm));
  for (size_t i = 0; i < hf.layers.size(); ++i) {
    SCOPED_TRACE("layer " + std::to_string(i));
    const LayerWeights &a = hf.layers[i], &b = mlx.layers[i];
    EXPECT_TRUE(close(a.attn_norm, b.attn_norm));
    EXPECT_TRUE(close(a.ffn_norm, b.ffn_norm));
    EXPECT_TRUE(close(a.q_norm, b.q_norm));
    EXPECT_TRUE(close(a.k_norm, b.k_norm));
    EXPECT_EQ(a.linear.conv, b.linear.conv);
    EXPECT_EQ(a.linear.norm, b.linear.norm);  // a plain weight: mlx-lm leaves it alone
  }
  const std::vector<int32_t> tokens = {5, 17, 200, 3, 999, 41, 41, 8, 630, 12, 77, 150, 2, 9, 300, 64, 1, 88};
  const std::vector<float> want = last_logits(hf, tokens), got = last_logits(mlx, tokens);
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, static_cast<double>(std::abs(want[i] - got[i])));
  EXPECT_LT(worst, 0.1);  // the goldens' tolerance; without the unshift the norms would be doubled
}

}  // namespace
}  // namespace keel
