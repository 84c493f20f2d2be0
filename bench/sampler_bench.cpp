// The sampler's cost per token on a 151,936-row vocabulary (Qwen2.5's), at the settings agents
// send: Claude Code samples at temperature 1, others add top_p or top_k. It runs between two
// forward passes, so it is measured against the decode step it adds to (a Q4_0 0.5B step is about
// 10 ms on 2 AVX-512 cores). Run: build/keel_microbench --benchmark_filter=Sampler
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "keel/engine/sampler.h"

namespace {

// Logits shaped like a language model's: a broad normal body and a handful of likely tokens.
std::vector<float> model_like_logits(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> body(0.0f, 2.5f);
  std::vector<float> logits(151936);
  for (float& l : logits) l = body(rng);
  std::uniform_int_distribution<size_t> pick(0, logits.size() - 1);
  for (int i = 0; i < 8; ++i) logits[pick(rng)] = 18.0f - static_cast<float>(i);
  return logits;
}

void run(benchmark::State& state, keel::SamplingParams params) {
  const std::vector<float> logits = model_like_logits(1);
  keel::Sampler sampler(params);
  for (auto _ : state) benchmark::DoNotOptimize(sampler.sample(logits));
}

void BM_SamplerTemperature1(benchmark::State& state) { run(state, {1.0, 0, 1.0, 0.0, 7}); }
void BM_SamplerTopP095(benchmark::State& state) { run(state, {1.0, 0, 0.95, 0.0, 7}); }
void BM_SamplerTopK40(benchmark::State& state) { run(state, {0.7, 40, 1.0, 0.0, 7}); }
void BM_SamplerMinP005(benchmark::State& state) { run(state, {1.0, 0, 1.0, 0.05, 7}); }
void BM_SamplerGreedy(benchmark::State& state) { run(state, {0.0, 0, 1.0, 0.0, 7}); }

BENCHMARK(BM_SamplerTemperature1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SamplerTopP095)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SamplerTopK40)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SamplerMinP005)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SamplerGreedy)->Unit(benchmark::kMicrosecond);

}  // namespace
