// Engine behaviour beyond the golden numerics: the forward loop over the paged KV pool (chunked
// prefill, prefix reuse, cancelling, a failed pass), raw generation (sampling, stop ids, limits),
// all weight formats.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <limits>

#include "keel/arch/model_loader.h"
#include "keel/arch/transformer.h"
#include "keel/engine/forward_loop.h"
#include "keel/engine/raw_generation.h"
#include "keel/engine/standalone_sequence.h"
#include "keel/arch/synth.h"
#include "keel/ops/bf16_dot_x86.h"
#include "keel/ops/int16_dot.h"
#include "keel/ops/mlx_bf16_x86.h"
#include "keel/ops/matmul.h"
#include "keel/util/half.h"
#include "keel/util/error.h"
#include "test_support.h"

namespace keel {
namespace {

using chat::Role;

std::filesystem::path toolcaller() { return test::shared_dir() / "models/tiny-toolcaller"; }

std::vector<int32_t> sample_prompt(int64_t n, int64_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = static_cast<int32_t>((i * 37 + 11) % vocab);
  return t;
}

// Roles that change every few tokens, so that blocks mix them.
std::vector<Role> sample_roles(size_t n) {
  std::vector<Role> r(n);
  for (size_t i = 0; i < n; ++i) r[i] = static_cast<Role>((i / 5) % chat::kRoleCount);
  return r;
}

struct Loaded {
  explicit Loaded(const std::filesystem::path& dir, int threads = 2)
      : weights(arch::load_model(dir)), pool(threads), model(weights, pool) {}
  ModelWeights weights;
  ThreadPool pool;
  Transformer model;
  std::vector<float> logits() const { return std::vector<float>(static_cast<size_t>(weights.spec.vocab_size)); }
};

// A token's logits must not depend on how the prompt was split into forward passes: every kernel
// sums each output in the same order whatever the number of tokens per call, and the pool reads a
// token's K/V the same way whichever pass stored it.
TEST(Engine, ChunkedPrefillEqualsOneShotBitForBit) {
  for (const char* name : {"tiny-toolcaller", "tiny-toolcaller-mlx4", "tiny-llama3-random", "stories260K-hf",
                           "tiny-gemma3-random", "tiny-qwen3moe-random", "tiny-qwen3moe-random-mlx4",
                           "tiny-gptoss-random", "tiny-gemma4-random", "tiny-qwen3next-random"}) {
    Loaded m(test::shared_dir() / "models" / name);
    const auto prompt = sample_prompt(150, m.weights.spec.vocab_size);
    const auto roles = sample_roles(prompt.size());
    std::vector<float> reference;
    for (int64_t chunk : {150, 64, 16, 7, 1}) {
      StandaloneSequence cache(m.weights.spec, 200);
      auto logits = m.logits();
      const PrefillResult r = prefill(m.model, cache.sequence(), prompt, roles, chunk, logits);
      EXPECT_EQ(r.prefilled, 150);
      EXPECT_FALSE(r.cancelled);
      EXPECT_EQ(cache.sequence().size(), 150);
      if (reference.empty()) reference = logits;
      EXPECT_EQ(logits, reference) << name << ", chunks of " << chunk;
    }
  }
}

// A prompt that continues a cached one reuses its whole blocks and prefills only the rest; the
// logits after it, and every decode step after that, are those of a fresh prefill.
TEST(Engine, ReusedPrefixEqualsFreshPrefill) {
  for (const char* name : {"tiny-toolcaller", "stories260K-hf"}) {
    Loaded m(test::shared_dir() / "models" / name);
    const auto first = sample_prompt(100, m.weights.spec.vocab_size);
    auto longer = first;
    for (int32_t t : sample_prompt(37, m.weights.spec.vocab_size)) longer.push_back((t * 3 + 1) % static_cast<int32_t>(m.weights.spec.vocab_size));
    const auto roles = sample_roles(longer.size());
    const auto first_roles = std::span<const Role>(roles).first(first.size());

    StandaloneSequence shared(m.weights.spec, 400);
    auto logits = m.logits();
    prefill(m.model, shared.sequence(), first, first_roles, 32, logits);
    shared.sequence().publish();
    const auto reused = shared.pool().open(longer, roles);
    EXPECT_EQ(reused->size(), 96);  // the whole 16-token blocks of the first prompt
    const PrefillResult r = prefill(m.model, *reused, longer, roles, 32, logits);
    EXPECT_EQ(r.prefilled, static_cast<int64_t>(longer.size()) - 96);

    StandaloneSequence fresh(m.weights.spec, 400);
    auto expected = m.logits();
    prefill(m.model, fresh.sequence(), longer, roles, static_cast<int64_t>(longer.size()), expected);
    EXPECT_EQ(logits, expected) << name;
    for (int step = 0; step < 4; ++step) {
      const int32_t next = argmax(expected);
      decode_step(m.model, *reused, next, logits);
      decode_step(m.model, fresh.sequence(), next, expected);
      EXPECT_EQ(logits, expected) << name << ", decode step " << step;
    }
  }
}

TEST(Engine, PrefillSeesCancelBeforeTheFirstChunk) {
  Loaded m(toolcaller(), 1);
  const auto prompt = sample_prompt(40, m.weights.spec.vocab_size);
  const auto roles = sample_roles(prompt.size());
  StandaloneSequence cache(m.weights.spec, 64);
  auto logits = m.logits();
  std::atomic<bool> cancelled{true};
  PrefillResult r = prefill(m.model, cache.sequence(), prompt, roles, 8, logits, &cancelled);
  EXPECT_TRUE(r.cancelled);
  EXPECT_EQ(r.prefilled, 0);
  EXPECT_EQ(cache.sequence().size(), 0);
  cancelled = false;
  r = prefill(m.model, cache.sequence(), prompt, roles, 8, logits, &cancelled);
  EXPECT_FALSE(r.cancelled);
  EXPECT_EQ(r.prefilled, 40);
}

// A pass that throws (here: a token outside the vocabulary) leaves the sequence as it was, ids
// and roles included, and the next pass gives the logits of a sequence that never saw it.
TEST(Engine, FailedPassLeavesTheSequenceUsable) {
  Loaded m(toolcaller(), 1);
  const auto prompt = sample_prompt(20, m.weights.spec.vocab_size);
  const auto roles = sample_roles(prompt.size());
  StandaloneSequence cache(m.weights.spec, 64);
  auto logits = m.logits();
  prefill(m.model, cache.sequence(), std::span(prompt).first(12), std::span(roles).first(12), 12, logits);
  EXPECT_THROW(decode_step(m.model, cache.sequence(), static_cast<int32_t>(m.weights.spec.vocab_size), logits), Error);
  EXPECT_EQ(cache.sequence().size(), 12);
  EXPECT_EQ(cache.sequence().token_ids().size(), 12u);
  prefill(m.model, cache.sequence(), prompt, roles, 5, logits);

  StandaloneSequence fresh(m.weights.spec, 64);
  auto expected = m.logits();
  prefill(m.model, fresh.sequence(), prompt, roles, 20, expected);
  EXPECT_EQ(logits, expected);
}

TEST(Engine, PrefillRejectsASequenceThatIsNotAPrefix) {
  Loaded m(toolcaller(), 1);
  const auto prompt = sample_prompt(20, m.weights.spec.vocab_size);
  const auto roles = sample_roles(prompt.size());
  StandaloneSequence cache(m.weights.spec, 64);
  auto logits = m.logits();
  prefill(m.model, cache.sequence(), std::span(prompt).first(10), std::span(roles).first(10), 4, logits);
  auto other = prompt;
  other[3] = (other[3] + 1) % static_cast<int32_t>(m.weights.spec.vocab_size);
  EXPECT_THROW(prefill(m.model, cache.sequence(), other, roles, 4, logits), Error);
  EXPECT_THROW(prefill(m.model, cache.sequence(), std::span(prompt).first(10), std::span(roles).first(10), 4, logits), Error);
  EXPECT_THROW(prefill(m.model, cache.sequence(), prompt, roles, 0, logits), Error);
  EXPECT_EQ(cache.sequence().size(), 10);
}

TEST(Engine, StopsAtEveryEosIdFromEveryFile) {
  const ModelWeights w = arch::load_model(toolcaller());
  // config.json says 1658, generation_config.json adds 1656, tokenizer_config names <|im_end|>.
  EXPECT_EQ(w.eos_token_ids, (std::vector<int32_t>{1656, 1658}));
}

TEST(Engine, SameSeedSameOutput) {
  Loaded m(toolcaller());
  auto run = [&](uint64_t seed) {
    StandaloneSequence cache(m.weights.spec, 64);
    GenerationOptions o;
    o.max_tokens = 24;
    o.sampling = {1.0, 50, 0.95, 0.02, seed};
    return generate_raw(m.model, cache.sequence(), sample_prompt(8, m.weights.spec.vocab_size), o).tokens;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));  // 24 draws at temperature 1 from a 1661-token vocabulary
}

TEST(Engine, GreedyStopsAtEndOfSequenceAndHonoursMaxTokens) {
  Loaded m(toolcaller(), 1);
  StandaloneSequence cache(m.weights.spec, 64);
  GenerationOptions o;
  o.max_tokens = 5;
  std::vector<int32_t> seen;
  auto r = generate_raw(m.model, cache.sequence(), sample_prompt(8, m.weights.spec.vocab_size), o, [&](int32_t id) {
    seen.push_back(id);
    return true;
  });
  EXPECT_EQ(r.tokens.size(), 5u);
  EXPECT_EQ(seen, r.tokens);
  EXPECT_EQ(r.stop, StopReason::MaxTokens);
  EXPECT_EQ(r.stats.prompt_tokens, 8);
  EXPECT_EQ(r.stats.generated_tokens, 5);
  EXPECT_EQ(cache.sequence().size(), 8 + 4);  // the last sampled token is never fed back

  // The first greedy token made an end-of-sequence id: nothing is generated.
  StandaloneSequence again(m.weights.spec, 64);
  o.stop_ids = {r.tokens[0]};
  const auto stopped = generate_raw(m.model, again.sequence(), sample_prompt(8, m.weights.spec.vocab_size), o);
  EXPECT_TRUE(stopped.tokens.empty());
  EXPECT_EQ(stopped.stop, StopReason::EndOfSequence);

  // The callback says stop after the second token.
  StandaloneSequence third(m.weights.spec, 64);
  o.stop_ids.clear();
  int calls = 0;
  const auto cut = generate_raw(m.model, third.sequence(), sample_prompt(8, m.weights.spec.vocab_size), o,
                                [&](int32_t) { return ++calls < 2; });
  EXPECT_EQ(cut.tokens, std::vector<int32_t>(r.tokens.begin(), r.tokens.begin() + 2));
  EXPECT_EQ(cut.stop, StopReason::Cancelled);
}

TEST(Engine, GenerationStopsWhenTheContextIsFull) {
  Loaded m(toolcaller(), 1);
  StandaloneSequence cache(m.weights.spec, 10);
  GenerationOptions o;
  o.max_tokens = 100;
  const auto r = generate_raw(m.model, cache.sequence(), sample_prompt(8, m.weights.spec.vocab_size), o);
  // Two decode steps fill positions 8 and 9; the token sampled after them has no room.
  EXPECT_EQ(r.tokens.size(), 3u);
  EXPECT_EQ(r.stop, StopReason::ContextFull);
  EXPECT_EQ(cache.sequence().size(), 10);
}

TEST(Engine, ContextOverflowIsAnError) {
  Loaded m(toolcaller(), 1);
  StandaloneSequence cache(m.weights.spec, 4);
  EXPECT_THROW(generate_raw(m.model, cache.sequence(), sample_prompt(8, m.weights.spec.vocab_size), GenerationOptions{}),
               Error);
  EXPECT_THROW(StandaloneSequence(m.weights.spec, 0), Error);
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
  // top_p 0 (inside both APIs' [0, 1]) keeps only the most likely token, even at a high
  // temperature where 1 and 2 are nearly even.
  Sampler top_p_zero({5.0, 0, 0.0, 0.0, 3});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(top_p_zero.sample(logits), 1);
  EXPECT_THROW(Sampler({-1.0, 0, 1.0, 0.0, 0}), Error);
  EXPECT_THROW(Sampler({1.0, 0, -0.1, 0.0, 0}), Error);
  EXPECT_THROW(Sampler({1.0, 0, 1.5, 0.0, 0}), Error);
}

// The sampler orders only as many candidates as its cuts need, in growing chunks; what it draws
// must still follow the distribution the cuts leave. 300 tokens with a slowly falling logit, so
// top_p's set (about 200 of them) spans several chunks; a masked token is never drawn.
TEST(Engine, SamplerDrawsFromTheDistributionItsCutsLeave) {
  constexpr int kTokens = 300;
  std::vector<float> logits(kTokens);
  for (int i = 0; i < kTokens; ++i) logits[static_cast<size_t>(i)] = -0.006f * static_cast<float>((i * 79) % kTokens);
  logits[150] = -std::numeric_limits<float>::infinity();
  auto expected = [&](double top_p) {
    std::vector<std::pair<double, int>> p;
    for (int i = 0; i < kTokens; ++i) p.emplace_back(std::exp(double(logits[static_cast<size_t>(i)])), i);
    std::sort(p.begin(), p.end(), [](auto a, auto b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
    double total = 0;
    for (auto& [w, i] : p) total += w;
    std::vector<double> out(kTokens, 0.0);
    double cumulative = 0, kept = 0;
    size_t n = 0;
    while (n < p.size() && cumulative < top_p * total) cumulative += p[n++].first;
    for (size_t k = 0; k < n; ++k) kept += p[k].first;
    for (size_t k = 0; k < n; ++k) out[static_cast<size_t>(p[k].second)] = p[k].first / kept;
    return out;
  };
  for (double top_p : {1.0, 0.7}) {
    Sampler sampler({1.0, 0, top_p, 0.0, 11});
    constexpr int kDraws = 60000;
    std::vector<int> seen(kTokens, 0);
    for (int d = 0; d < kDraws; ++d) ++seen[static_cast<size_t>(sampler.sample(logits))];
    const std::vector<double> want = expected(top_p);
    EXPECT_EQ(seen[150], 0);
    // Per kept token 200 to 300 draws are expected: five standard deviations, and the sets agree.
    for (int i = 0; i < kTokens; ++i) {
      const double mean = want[static_cast<size_t>(i)] * kDraws;
      EXPECT_NEAR(seen[static_cast<size_t>(i)], mean, 5 * std::sqrt(mean) + 1e-9) << "token " << i << ", top_p " << top_p;
    }
  }
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
      const ModelWeights w = arch::load_model(dir);
      for (const Matrix* m : {&w.layers[0].down, &w.layers[0].gate, &w.embed}) {
        const int64_t n = 5;
        std::vector<float> x(static_cast<size_t>(n * m->cols));
        for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.37f);
        // The reference meets the activations as the kernel does: on AVX512_BF16 CPUs bf16 and MLX
        // weights meet them rounded to bf16 (bf16_dot_x86.h, mlx_bf16_x86.h); elsewhere MLX weights
        // meet them quantized to int16 per block of 32 (int16_dot.h).
        std::vector<float> x_ref = x;
        const bool mlx = f == WeightFormat::MLX4 || f == WeightFormat::MLX8;
        const ops::MlxRows rows{nullptr, nullptr, nullptr, m->bits(), m->group_size, m->cols};
        if ((f == WeightFormat::BF16 && ops::cpu_has_avx512_bf16()) || (mlx && ops::mlx_bf16_supported(rows))) {
          for (float& v : x_ref) v = bf16_to_float(float_to_bf16(v));
        } else if (mlx && ops::mlx_i16_supported(rows)) {
          ops::I16Activations a;
          ops::size_i16_activations(m->cols, n, /*pairs_split=*/false, a);
          ops::quantize_i16_activations(x.data(), 0, n, a);
          for (size_t i = 0; i < x_ref.size(); ++i) x_ref[i] = a.scale[i / 32] * static_cast<float>(a.q[i]);
        }
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
