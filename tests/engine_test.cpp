// Engine behaviour beyond the golden numerics: chunked prefill, sampling, stop ids, all formats.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "keel/arch/transformer.h"
#include "keel/engine/generator.h"
#include "keel/kv/bf16_kv_cache.h"
#include "keel/model/synth.h"
#include "keel/ops/bf16_dot_x86.h"
#include "keel/ops/matmul.h"
#include "keel/util/half.h"
#include "keel/util/error.h"
#include "test_support.h"

namespace keel {
namespace {

std::filesystem::path toolcaller() { return test::shared_dir() / "models/tiny-toolcaller"; }

std::vector<int32_t> sample_prompt(int64_t n, int64_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = static_cast<int32_t>((i * 37 + 11) % vocab);
  return t;
}

// A token's logits must not depend on how the prompt was split into forward passes: every kernel
// sums each output in the same order whatever the number of tokens per call.
TEST(Engine, ChunkedPrefillEqualsOneShotBitForBit) {
  for (const char* name : {"tiny-toolcaller", "tiny-toolcaller-mlx4", "tiny-llama3-random", "stories260K-hf"}) {
    const ModelWeights w = load_model(test::shared_dir() / "models" / name);
    ThreadPool pool(2);
    Transformer model(w, pool);
    const auto prompt = sample_prompt(150, w.spec.vocab_size);
    std::vector<float> reference;
    for (int64_t chunk : {150, 64, 7, 1}) {
      Bf16KvCache cache(w.spec, 200);
      Generator g(model, cache);
      auto logits = g.prefill(prompt, chunk);
      if (reference.empty()) reference = logits;
      EXPECT_EQ(logits, reference) << name << ", chunks of " << chunk;
    }
  }
}

TEST(Engine, StopsAtEveryEosIdFromEveryFile) {
  const ModelWeights w = load_model(toolcaller());
  // config.json says 1658, generation_config.json adds 1656, tokenizer_config names <|im_end|>.
  EXPECT_EQ(w.eos_token_ids, (std::vector<int32_t>{1656, 1658}));
}

TEST(Engine, SameSeedSameOutput) {
  const ModelWeights w = load_model(toolcaller());
  ThreadPool pool(2);
  Transformer model(w, pool);
  auto run = [&](uint64_t seed) {
    Bf16KvCache cache(w.spec, 64);
    Generator g(model, cache);
    GenerationOptions o;
    o.max_tokens = 24;
    o.sampling = {1.0, 50, 0.95, 0.02, seed};
    return g.generate(sample_prompt(8, w.spec.vocab_size), o).tokens;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));  // 24 draws at temperature 1 from a 1661-token vocabulary
}

TEST(Engine, GreedyStopsAtEndOfSequenceAndHonoursMaxTokens) {
  const ModelWeights w = load_model(toolcaller());
  ThreadPool pool(1);
  Transformer model(w, pool);
  Bf16KvCache cache(w.spec, 64);
  Generator g(model, cache);
  GenerationOptions o;
  o.max_tokens = 5;
  auto r = g.generate(sample_prompt(8, w.spec.vocab_size), o);
  EXPECT_EQ(r.tokens.size(), 5u);
  EXPECT_EQ(r.stop, StopReason::MaxTokens);
  EXPECT_EQ(cache.size(), 8 + 4);  // the last sampled token is never fed back
}

TEST(Engine, ContextOverflowIsAnError) {
  const ModelWeights w = load_model(toolcaller());
  ThreadPool pool(1);
  Transformer model(w, pool);
  Bf16KvCache cache(w.spec, 4);
  Generator g(model, cache);
  EXPECT_THROW(g.generate(sample_prompt(8, w.spec.vocab_size), GenerationOptions{}), Error);
}

TEST(Engine, SamplerFilters) {
  std::vector<float> logits = {0.0f, 5.0f, 4.9f, -3.0f};
  Sampler greedy({});
  EXPECT_EQ(greedy.sample(logits), 1);
  Sampler top1({1.0, 1, 1.0, 0.0, 3});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(top1.sample(logits), 1);
  Sampler min_p({1.0, 0, 1.0, 0.5, 3});  // only tokens within half the top probability: 1 and 2
  for (int i = 0; i < 50; ++i) {
    int t = min_p.sample(logits);
    EXPECT_TRUE(t == 1 || t == 2);
  }
  Sampler top_p({1.0, 0, 0.3, 0.0, 3});  // the first token already covers 30%
  for (int i = 0; i < 20; ++i) EXPECT_EQ(top_p.sample(logits), 1);
  EXPECT_THROW(Sampler({-1.0, 0, 1.0, 0.0, 0}), Error);
  EXPECT_THROW(Sampler({1.0, 0, 0.0, 0.0, 0}), Error);
}

// Every weight format through both matmul paths (one token: fused kernels; several: row tiles)
// against a plain double-precision product over decode_row.
TEST(Engine, MatmulAllFormatsBothPaths) {
  test::TempDir tmp;
  std::ofstream(tmp.path() / "c.json") << R"({"model_type": "llama", "hidden_size": 320, "intermediate_size": 192,
    "num_hidden_layers": 1, "num_attention_heads": 5, "vocab_size": 77, "tie_word_embeddings": true})";
  ThreadPool pool(2);
  for (auto f : {WeightFormat::F32, WeightFormat::F16, WeightFormat::BF16, WeightFormat::MLX4, WeightFormat::MLX8}) {
    for (int group : {32, 64}) {
      if (group == 32 && f != WeightFormat::MLX4 && f != WeightFormat::MLX8) continue;
      SynthOptions o;
      o.format = f;
      o.mlx_group_size = group;
      auto dir = tmp.path() / (std::string(weight_format_name(f)) + std::to_string(group));
      synthesize_model(tmp.path() / "c.json", dir, o);
      const ModelWeights w = load_model(dir);
      for (const Matrix* m : {&w.layers[0].down, &w.layers[0].gate, &w.embed}) {
        const int64_t n = 5;
        std::vector<float> x(static_cast<size_t>(n * m->cols));
        for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.37f);
        // On AVX512_BF16 CPUs bf16 weights meet activations rounded to bf16 (see bf16_dot_x86.h).
        std::vector<float> x_ref = x;
        if (f == WeightFormat::BF16 && ops::cpu_has_avx512_bf16())
          for (float& v : x_ref) v = bf16_to_float(float_to_bf16(v));
        std::vector<float> y(static_cast<size_t>(n * m->rows)), y1(static_cast<size_t>(m->rows)), row(static_cast<size_t>(m->cols));
        ops::matmul(*m, x.data(), n, y.data(), pool);
        for (int64_t r = 0; r < m->rows; ++r) {
          ops::decode_row(*m, r, row.data());
          for (int64_t t = 0; t < n; ++t) {
            double ref = 0;
            for (int64_t c = 0; c < m->cols; ++c) ref += static_cast<double>(row[static_cast<size_t>(c)]) * x_ref[static_cast<size_t>(t * m->cols + c)];
            ASSERT_NEAR(y[static_cast<size_t>(t * m->rows + r)], ref, 1e-4) << m->name << " " << weight_format_name(f) << " token " << t;
          }
        }
        for (int64_t t = 0; t < n; ++t) {
          ops::matmul(*m, x.data() + t * m->cols, 1, y1.data(), pool);
          for (int64_t r = 0; r < m->rows; ++r)
            ASSERT_EQ(y1[static_cast<size_t>(r)], y[static_cast<size_t>(t * m->rows + r)]) << m->name << " " << weight_format_name(f);
        }
      }
    }
  }
}

}  // namespace
}  // namespace keel
