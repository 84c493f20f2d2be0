// Attention of 1, 7 or 63 queries over 4096 cached positions, per KV format and head dim: how long
// a (query, position) pair takes and how fast the cache is read. 4096 positions fit in the CPU
// caches; a second size (131072 positions, 24-64 MB at head dim 128) has to stream from memory,
// where the smaller formats pay off. Rows sit K, V, K, V, ... in one buffer, cut into spans of 16
// rows like the pool's blocks.
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "keel/kv/kv_attention.h"

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
      kv::encode_kv_row(f, x.data(), dim, rotate, c.bytes.data() + p * stride + half * c.row);
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

// Queries at the last positions, seven query heads per row (a KV group of Qwen2.5-0.5B): 1 is one
// head of a decode step, 7 a whole KV group of it, 63 nine rows of a prefill chunk.
std::vector<keel::ops::AttentionQuery> queries_at_the_end(const Cache& c, int64_t n, std::vector<float>& out) {
  const auto dim = static_cast<int64_t>(c.q.size());
  out.resize(static_cast<size_t>(n * dim));
  std::vector<keel::ops::AttentionQuery> qs;
  for (int64_t i = 0; i < n; ++i) qs.push_back({.q = c.q.data(), .pos = c.positions - 1 - i / 7, .out = out.data() + i * dim});
  return qs;
}

void BM_AttendSpans(benchmark::State& state) {
  const auto f = static_cast<KvFormat>(state.range(0));
  const int64_t dim = state.range(1), n_queries = state.range(3);
  state.SetLabel(std::string(keel::kv_format_name(f)) + (kv::rotated_by_default(f) ? " rotated" : ""));
  const Cache c = make_cache(f, dim, state.range(2));
  std::vector<float> out;
  const auto queries = queries_at_the_end(c, n_queries, out);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  for (auto _ : state) {
    kv::attend_spans(dim, {.scale = scale}, c.spans, 0, queries);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  // Seconds per (query, position) pair (printed with an SI prefix: "11.3n" + "s" = 11.3 ns), and
  // the K and V bytes of the positions read per second (once per call, whatever the queries).
  const auto pairs = static_cast<double>(state.iterations()) * static_cast<double>(c.positions * n_queries);
  state.counters["per_pair"] = benchmark::Counter(pairs, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * c.positions * static_cast<int64_t>(2 * c.row));
}

void formats_and_dims(benchmark::internal::Benchmark* b) {
  for (int64_t queries : {1, 7, 63})
    for (int64_t dim : {64, 128})
      for (KvFormat f : keel::kAllKvFormats) b->Args({static_cast<int64_t>(f), dim, 4096, queries});
  for (KvFormat f : keel::kAllKvFormats) b->Args({static_cast<int64_t>(f), 128, 131072, 7});
}

}  // namespace

BENCHMARK(BM_AttendSpans)->Apply(formats_and_dims)->ArgNames({"format", "dim", "positions", "queries"});
