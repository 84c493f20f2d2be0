// Attention of one query head over 4096 cached positions, per KV format and head dim: how long a
// position takes and how fast the cache is read. 4096 positions fit in the CPU caches; a second
// size (131072 positions, 24-64 MB at head dim 128) has to stream from memory, where the smaller
// formats pay off. Rows sit K, V, K, V, ... in one buffer, cut into
// spans of 16 rows like the pool's blocks. The plain bf16 cache kernel (ops::attend_bf16) is the
// baseline the quantized cache replaces.
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "keel/kv/kv_attention.h"
#include "keel/ops/simd_kernels.h"

namespace {

using keel::KvFormat;
namespace kv = keel::kv;

constexpr int64_t kBlock = 16;

struct Cache {
  std::vector<uint8_t> bytes;
  std::vector<kv::KvSpan> spans;
  std::vector<float> q;
  size_t row = 0;
  int64_t positions = 0;
};

Cache make_cache(KvFormat f, int64_t dim, int64_t positions) {
  const bool rotate = kv::rotated_by_default(f);
  Cache c;
  c.row = kv::row_bytes(f, dim);
  c.positions = positions;
  const size_t stride = 2 * c.row;
  c.bytes.resize(stride * positions);
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(dim));
  for (int64_t p = 0; p < positions; ++p) {
    for (int half = 0; half < 2; ++half) {
      for (float& v : x) v = normal(rng);
      kv::encode_row(f, x.data(), dim, rotate, c.bytes.data() + p * stride + half * c.row);
    }
  }
  for (int64_t p = 0; p < positions; p += kBlock) {
    const uint8_t* base = c.bytes.data() + p * stride;
    c.spans.push_back({f, rotate, base, base + c.row, kBlock, stride});
  }
  c.q.resize(static_cast<size_t>(dim));
  for (float& v : c.q) v = normal(rng);
  return c;
}

void report(benchmark::State& state, const Cache& c) {
  const size_t row_bytes = c.row;
  const auto rows = static_cast<int64_t>(state.iterations()) * c.positions;
  state.SetItemsProcessed(rows);
  state.SetBytesProcessed(rows * static_cast<int64_t>(2 * row_bytes));  // K and V of every position
  // Seconds per position (printed with an SI prefix: "11.3n" + "s" = 11.3 ns).
  state.counters["per_pos"] = benchmark::Counter(static_cast<double>(rows), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_AttendSpans(benchmark::State& state) {
  const auto f = static_cast<KvFormat>(state.range(0));
  const int64_t dim = state.range(1);
  state.SetLabel(std::string(keel::kv_format_name(f)) + (kv::rotated_by_default(f) ? " rotated" : ""));
  const Cache c = make_cache(f, dim, state.range(2));
  std::vector<float> out(static_cast<size_t>(dim));
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  for (auto _ : state) {
    kv::attend_spans(c.q.data(), dim, {.scale = scale}, c.spans, 0, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  report(state, c);
}

// Baseline: the plain cache's kernel over the same bf16 rows.
void BM_PlainBf16Cache(benchmark::State& state) {
  const int64_t dim = state.range(0);
  const Cache c = make_cache(KvFormat::BF16, dim, state.range(1));
  const auto* k = reinterpret_cast<const uint16_t*>(c.bytes.data());
  std::vector<float> out(static_cast<size_t>(dim)), scores(static_cast<size_t>(c.positions));
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  for (auto _ : state) {
    keel::ops::attend_bf16(c.q.data(), k, k + dim, 2 * dim, c.positions, dim, scale, scores.data(), out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  report(state, c);
}

void formats_and_dims(benchmark::internal::Benchmark* b) {
  for (int64_t dim : {64, 128})
    for (KvFormat f : keel::kAllKvFormats) b->Args({static_cast<int64_t>(f), dim, 4096});
  for (KvFormat f : keel::kAllKvFormats) b->Args({static_cast<int64_t>(f), 128, 131072});
}

}  // namespace

BENCHMARK(BM_AttendSpans)->Apply(formats_and_dims)->ArgNames({"format", "dim", "positions"});
BENCHMARK(BM_PlainBf16Cache)->Args({64, 4096})->Args({128, 4096})->Args({128, 131072})->ArgNames({"dim", "positions"});
