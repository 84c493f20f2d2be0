// ops::matmul per weight format at Qwen2.5-0.5B's FFN shapes (rows x cols = outputs x inputs:
// 4864 x 896 gate/up, 896 x 4864 down): decode (1 token) as GB/s of weight bytes read, from memory
// (a ring of copies larger than the caches, each call the next one), and prefill (512 tokens) as
// GFLOP/s (2 * rows * cols * tokens), at 1 and 2 threads. Decode also runs from cache (mem:0), the
// kernel's own cost. Formats: bf16, MLX 4/8-bit (group 64, as
// mlx-lm writes them) and the ggml block formats (random blocks with finite scales; K formats need
// cols % 256 == 0, so only the 896 x 4864 shape). Run with --benchmark_min_time=0.2 or so;
// KEEL_SIMD_TARGET=AVX2 (as for keel) measures one target's kernels.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "keel/ops/matmul.h"
#include "keel/ops/simd_target.h"
#include "keel/util/half.h"

namespace {

using namespace keel;

const bool kSimdTargetFromEnv = [] {
  ops::apply_simd_target_from_env();
  return true;
}();

struct Weights {
  std::vector<uint8_t> bytes;
  Matrix m;
};

Weights make(WeightFormat f, int64_t rows, int64_t cols, uint32_t seed) {
  Weights w;
  Matrix& m = w.m;
  m.format = f;
  m.rows = rows;
  m.cols = cols;
  if (f == WeightFormat::MLX4 || f == WeightFormat::MLX8) {
    m.group_size = 64;
    for (int64_t g = 0; g < rows * cols / 64; ++g) {
      m.scales.push_back(0.01f);
      m.biases.push_back(-0.05f);
    }
    m.scales.resize(m.scales.size() + kMlxScalePadding, 0.0f);
    m.biases.resize(m.biases.size() + kMlxScalePadding, 0.0f);
  }
  w.bytes.resize(m.row_bytes() * static_cast<size_t>(rows));
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;  // splitmix64: the ring is hundreds of MB
  for (size_t i = 0; i < w.bytes.size(); i += 8) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::memcpy(w.bytes.data() + i, &z, std::min<size_t>(8, w.bytes.size() - i));
  }
  const GgmlBlock g = ggml_block_size(f);
  auto put_half = [](uint8_t* p, float v) {
    const uint16_t h = float_to_f16(v);
    p[0] = static_cast<uint8_t>(h), p[1] = static_cast<uint8_t>(h >> 8);
  };
  if (f == WeightFormat::BF16) {
    for (size_t i = 0; i + 1 < w.bytes.size(); i += 2) {
      const uint16_t h = float_to_bf16(static_cast<float>(static_cast<int8_t>(w.bytes[i])) / 4096.0f);
      w.bytes[i] = static_cast<uint8_t>(h), w.bytes[i + 1] = static_cast<uint8_t>(h >> 8);
    }
  } else if (is_ggml_block_format(f)) {
    for (size_t i = 0; i < w.bytes.size(); i += static_cast<size_t>(g.bytes)) {
      uint8_t* b = w.bytes.data() + i;
      switch (f) {
        case WeightFormat::Q4_K:
        case WeightFormat::Q5_K: put_half(b, 1e-3f), put_half(b + 2, 1e-3f); break;
        case WeightFormat::Q6_K: put_half(b + 208, 1e-3f); break;
        case WeightFormat::MXFP4_GGUF: b[0] = 120; break;
        default: put_half(b, 1e-2f); break;
      }
    }
  }
  m.data = w.bytes.data();
  ops::interleave_for_kernels(m);  // as keel's loader does (Q4_0 under the AVX2 int16 kernels)
  return w;
}

constexpr WeightFormat kFormats[] = {WeightFormat::BF16, WeightFormat::MLX8, WeightFormat::MLX4,
                                     WeightFormat::Q8_0, WeightFormat::Q6_K, WeightFormat::Q5_K,
                                     WeightFormat::Q5_0, WeightFormat::Q4_K, WeightFormat::Q4_0,
                                     WeightFormat::MXFP4_GGUF};

// args: format index, rows, cols, tokens, threads, whether a decode streams from memory (0: the
// same matrix every call, from cache: what the kernel's instructions cost).
void BM_Matmul(benchmark::State& state) {
  const WeightFormat f = kFormats[state.range(0)];
  const int64_t rows = state.range(1), cols = state.range(2), tokens = state.range(3);
  const int threads = static_cast<int>(state.range(4));
  const bool from_memory = state.range(5) != 0;
  if (ggml_block_size(f).elements > 1 && cols % ggml_block_size(f).elements) {
    state.SkipWithError("cols not a multiple of the block");
    return;
  }
  state.SetLabel(weight_format_name(f));
  // Decode streams from memory: enough copies to pass 256 MB. Prefill reuses one matrix.
  const size_t one = make(f, 1, cols, 0).m.stored_bytes() * static_cast<size_t>(rows);
  const size_t copies = tokens == 1 && from_memory ? std::max<size_t>(2, (256u << 20) / one + 1) : 1;
  std::vector<Weights> ring;
  for (size_t i = 0; i < copies; ++i) ring.push_back(make(f, rows, cols, static_cast<uint32_t>(i + 1)));
  std::vector<float> x(static_cast<size_t>(tokens * cols)), y(static_cast<size_t>(tokens * rows));
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& v : x) v = nd(rng);
  ThreadPool pool(threads);
  size_t i = 0;
  for (auto _ : state) {
    ops::matmul(ring[i].m, x.data(), tokens, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
    i = (i + 1) % ring.size();
  }
  const double calls = static_cast<double>(state.iterations());
  state.counters["GB/s"] = benchmark::Counter(calls * static_cast<double>(ring[0].m.stored_bytes()) / 1e9,
                                              benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(calls * 2.0 * rows * cols * tokens / 1e9, benchmark::Counter::kIsRate);
}

void shapes(benchmark::internal::Benchmark* b) {
  for (int64_t threads : {1, 2})
    for (int64_t tokens : {1, 512})
      for (auto [rows, cols] : {std::pair<int64_t, int64_t>{4864, 896}, {896, 4864}})
        for (int64_t memory : {1, 0})
          for (int64_t f = 0; f < static_cast<int64_t>(std::size(kFormats)); ++f)
            if (tokens == 1 || memory == 0) b->Args({f, rows, cols, tokens, threads, memory});
}

BENCHMARK(BM_Matmul)->Apply(shapes)->ArgNames({"fmt", "rows", "cols", "tokens", "threads", "mem"})->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
