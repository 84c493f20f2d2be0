// attend_spans: agreement with a double-precision reference over the decoded rows, for mixed
// formats and rotations, with sliding windows, soft-capping and sinks, and bit-identical results
// however the rows are split into spans (and however many rows before a window are passed).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "hwy/targets.h"
#include "keel/kv/kv_attention.h"
#include "keel/util/error.h"
#include "guarded_bytes_support.h"

using keel::KvFormat;
using keel::ops::AttentionParams;
namespace kv = keel::kv;

namespace {

// Rows of one format and rotation, K and V interleaved in one buffer the way a pool block might
// hold them: row i's key at i * stride, its value at i * stride + row_bytes.
struct Segment {
  KvFormat format;
  bool rotated;
  int64_t count;
  size_t stride;
  keel::test::GuardedBytes bytes{0};  // ends at an unmapped page: the uninstrumented kernels' over-reads fault
  std::vector<float> k, v;     // decoded, for the reference

  kv::KvSpan span(int64_t first, int64_t n) const {
    const uint8_t* base = bytes.data() + static_cast<size_t>(first) * stride;
    return {format, rotated, base, base + kv::row_bytes(format, static_cast<int64_t>(k.size() / count)), n, stride};
  }
};

Segment make_segment(std::mt19937& rng, KvFormat f, bool rotated, int64_t count, int64_t dim) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Segment s{f, rotated, count, 2 * kv::row_bytes(f, dim) + 8, keel::test::GuardedBytes{0}, {}, {}};  // 8 bytes of padding per row
  s.bytes = keel::test::GuardedBytes(s.stride * static_cast<size_t>(count));
  s.k.resize(static_cast<size_t>(count * dim));
  s.v.resize(static_cast<size_t>(count * dim));
  std::vector<float> k(static_cast<size_t>(dim)), v(static_cast<size_t>(dim));
  for (int64_t i = 0; i < count; ++i) {
    for (int64_t d = 0; d < dim; ++d) {
      k[d] = normal(rng) * (d % 17 == 3 ? 6.0f : 1.0f);  // a few outlier channels, as real keys have
      v[d] = normal(rng) + 0.3f;
    }
    uint8_t* row = s.bytes.data() + static_cast<size_t>(i) * s.stride;
    kv::encode_kv_row(f, k.data(), dim, rotated, row);
    kv::encode_kv_row(f, v.data(), dim, rotated, row + kv::row_bytes(f, dim));
    kv::decode_kv_row(f, row, dim, rotated, s.k.data() + i * dim);
    kv::decode_kv_row(f, row + kv::row_bytes(f, dim), dim, rotated, s.v.data() + i * dim);
  }
  return s;
}

// Exact softmax attention in double over the decoded rows, which sit at positions first_pos,
// first_pos + 1, ... with the query at the last one; the kernel decodes the rows to f32 as these
// were decoded, which leaves only float rounding between the two. Written
// out plainly from the definitions in kv_attention.h: the window keeps the last `window` positions,
// the soft-cap squashes scaled scores, the sink adds exp(sink) to the denominator only.
std::vector<double> reference(const std::vector<float>& q, const AttentionParams& p, const std::vector<Segment>& segs,
                              int64_t first_pos = 0) {
  const size_t dim = q.size();
  std::vector<double> scores;
  std::vector<const float*> values;
  for (const Segment& s : segs) {
    const std::vector<double> qs(q.begin(), q.end());
    for (int64_t i = 0; i < s.count; ++i) {
      double dot = 0;
      for (size_t d = 0; d < dim; ++d) dot += qs[d] * s.k[i * dim + d];
      double score = dot * p.scale;
      if (p.softcap > 0) score = p.softcap * std::tanh(score / p.softcap);
      scores.push_back(score);
      values.push_back(s.v.data() + i * dim);
    }
  }
  const int64_t last = first_pos + static_cast<int64_t>(scores.size()) - 1;
  const int64_t first_read = p.window > 0 ? std::max<int64_t>(first_pos, last - p.window + 1) : first_pos;
  const auto skip = static_cast<size_t>(first_read - first_pos);
  double mx = p.has_sink ? p.sink : -INFINITY;
  for (size_t j = skip; j < scores.size(); ++j) mx = std::max(mx, scores[j]);
  double sum = p.has_sink ? std::exp(p.sink - mx) : 0.0;
  std::vector<double> out(dim, 0.0);
  for (size_t j = skip; j < scores.size(); ++j) {
    const double w = std::exp(scores[j] - mx);
    sum += w;
    for (size_t d = 0; d < dim; ++d) out[d] += w * values[j][d];
  }
  for (double& o : out) o /= sum;
  return out;
}

std::vector<double> reference(const std::vector<float>& q, float scale, const std::vector<Segment>& segs) {
  return reference(q, AttentionParams{.scale = scale}, segs);
}

// attend_spans over the rows of `spans`, the first of them at position first_pos.
std::vector<float> attend(const std::vector<float>& q, const AttentionParams& p, std::span<const kv::KvSpan> spans,
                          int64_t first_pos = 0) {
  std::vector<float> out(q.size());
  kv::attend_spans(q.data(), static_cast<int64_t>(q.size()), p, spans, first_pos, out.data());
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Cuts every segment into spans at random points (empty spans included).
std::vector<kv::KvSpan> random_split(std::mt19937& rng, const std::vector<Segment>& segs) {
  std::vector<kv::KvSpan> spans;
  for (const Segment& s : segs) {
    int64_t first = 0;
    while (first < s.count) {
      const int64_t n = std::min<int64_t>(s.count - first, std::uniform_int_distribution<int64_t>(0, 40)(rng));
      spans.push_back(s.span(first, n));
      first += n;
    }
  }
  return spans;
}

std::vector<kv::KvSpan> whole(const std::vector<Segment>& segs) {
  std::vector<kv::KvSpan> spans;
  for (const Segment& s : segs) spans.push_back(s.span(0, s.count));
  return spans;
}

std::vector<float> random_query(std::mt19937& rng, int64_t dim, float spread) {
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<float> q(static_cast<size_t>(dim));
  for (float& x : q) x = normal(rng);
  return q;
}

std::vector<Segment> mixed_segments(std::mt19937& rng, int64_t dim) {
  std::vector<Segment> segs;
  segs.push_back(make_segment(rng, KvFormat::BF16, false, 20, dim));   // sinks
  segs.push_back(make_segment(rng, KvFormat::Int4, true, 150, dim));   // bulk
  segs.push_back(make_segment(rng, KvFormat::Int8, false, 37, dim));   // a tool call
  segs.push_back(make_segment(rng, KvFormat::Int2, true, 45, dim));
  segs.push_back(make_segment(rng, KvFormat::Int4, false, 33, dim));
  segs.push_back(make_segment(rng, KvFormat::Int8, true, 17, dim));
  segs.push_back(make_segment(rng, KvFormat::BF16, false, 61, dim));   // recent window
  return segs;
}

}  // namespace

TEST(KvAttention, MixedFormatSpansMatchADoublePrecisionReference) {
  std::mt19937 rng(11);
  for (int64_t dim : {64, 128}) {
    const auto segs = mixed_segments(rng, dim);
    const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
    for (float spread : {0.3f, 1.0f, 3.0f}) {  // from flat to sharp attention
      const auto q = random_query(rng, dim, spread);
      const auto exact = reference(q, scale, segs);
      std::vector<float> got(static_cast<size_t>(dim));
      kv::attend_spans(q.data(), dim, {.scale = scale}, whole(segs), 0, got.data());
      double worst = 0;
      for (int64_t d = 0; d < dim; ++d) worst = std::max(worst, std::fabs(got[d] - exact[d]));
      // Only float rounding is left: the rows are decoded to f32 exactly as the reference's were.
      EXPECT_LT(worst, 1e-5) << "dim " << dim << " spread " << spread;
    }
  }
}

TEST(KvAttention, EachFormatAloneMatchesTheReference) {
  std::mt19937 rng(12);
  for (KvFormat f : keel::kAllKvFormats) {
    for (bool rotated : {false, true}) {
      for (int64_t dim : {64, 128}) {
        const std::vector<Segment> segs{make_segment(rng, f, rotated, 100, dim)};
        const auto q = random_query(rng, dim, 1.5f);
        const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
        const auto want = reference(q, scale, segs);
        std::vector<float> got(static_cast<size_t>(dim));
        kv::attend_spans(q.data(), dim, {.scale = scale}, whole(segs), 0, got.data());
        for (int64_t d = 0; d < dim; ++d)
          ASSERT_NEAR(got[d], want[d], 1e-5) << keel::kv_format_name(f) << " rotated " << rotated << " dim " << dim;
      }
    }
  }
}

TEST(KvAttention, SplittingRowsIntoSpansDifferentlyGivesIdenticalBits) {
  std::mt19937 rng(13);
  for (int64_t dim : {64, 128}) {
    const auto segs = mixed_segments(rng, dim);
    const auto q = random_query(rng, dim, 2.0f);
    const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
    std::vector<float> base(static_cast<size_t>(dim)), other(static_cast<size_t>(dim));
    kv::attend_spans(q.data(), dim, {.scale = scale}, whole(segs), 0, base.data());
    for (int trial = 0; trial < 30; ++trial) {
      const auto spans = random_split(rng, segs);
      kv::attend_spans(q.data(), dim, {.scale = scale}, spans, 0, other.data());
      ASSERT_EQ(std::memcmp(base.data(), other.data(), base.size() * sizeof(float)), 0)
          << "dim " << dim << " split into " << spans.size() << " spans";
    }
    // One row per span.
    std::vector<kv::KvSpan> singles;
    for (const Segment& s : segs)
      for (int64_t i = 0; i < s.count; ++i) singles.push_back(s.span(i, 1));
    kv::attend_spans(q.data(), dim, {.scale = scale}, singles, 0, other.data());
    EXPECT_EQ(std::memcmp(base.data(), other.data(), base.size() * sizeof(float)), 0);
  }
}

TEST(KvAttention, SameBitsFromConcurrentThreads) {
  std::mt19937 rng(14);
  const int64_t dim = 128;
  const auto segs = mixed_segments(rng, dim);
  const auto q = random_query(rng, dim, 1.0f);
  std::vector<float> base(dim);
  kv::attend_spans(q.data(), dim, {.scale = 0.09f}, whole(segs), 0, base.data());
  std::vector<std::vector<float>> outs(4, std::vector<float>(dim));
  std::vector<std::thread> threads;
  for (auto& o : outs)
    threads.emplace_back([&] {
      for (int rep = 0; rep < 20; ++rep) kv::attend_spans(q.data(), dim, {.scale = 0.09f}, whole(segs), 0, o.data());
    });
  for (auto& t : threads) t.join();
  for (const auto& o : outs) EXPECT_EQ(std::memcmp(o.data(), base.data(), dim * sizeof(float)), 0);
}

TEST(KvAttention, OneRowReturnsItsValue) {
  std::mt19937 rng(15);
  for (KvFormat f : {KvFormat::BF16, KvFormat::Int8}) {
    const std::vector<Segment> segs{make_segment(rng, f, false, 1, 64)};
    const auto q = random_query(rng, 64, 1.0f);
    std::vector<float> got(64);
    kv::attend_spans(q.data(), 64, {.scale = 0.125f}, whole(segs), 0, got.data());
    for (int d = 0; d < 64; ++d) EXPECT_EQ(got[d], segs[0].v[d]) << keel::kv_format_name(f);
  }
}

TEST(KvAttention, LargeScoresStayFinite) {
  std::mt19937 rng(16);
  const auto segs = mixed_segments(rng, 64);
  const auto q = random_query(rng, 64, 50.0f);  // scores in the hundreds: a naive exp overflows
  const auto want = reference(q, 1.0f, segs);
  std::vector<float> got(64);
  kv::attend_spans(q.data(), 64, {.scale = 1.0f}, whole(segs), 0, got.data());
  for (int d = 0; d < 64; ++d) {
    ASSERT_TRUE(std::isfinite(got[d]));
    EXPECT_NEAR(got[d], want[d], 1e-4);
  }
}

TEST(KvAttention, NoRowsGiveZerosAndBadArgumentsThrow) {
  std::vector<float> q(64, 1.0f), out(64, 5.0f);
  kv::attend_spans(q.data(), 64, {.scale = 1.0f}, {}, 0, out.data());
  for (float x : out) EXPECT_EQ(x, 0.0f);
  std::vector<uint8_t> row(256);
  const kv::KvSpan bad_dim[] = {{KvFormat::Int8, false, row.data(), row.data(), 1, 100}};
  EXPECT_THROW(kv::attend_spans(q.data(), 48, {.scale = 1.0f}, bad_dim, 0, out.data()), keel::Error);
  const kv::KvSpan negative[] = {{KvFormat::BF16, false, row.data(), row.data(), -1, 100}};
  EXPECT_THROW(kv::attend_spans(q.data(), 64, {.scale = 1.0f}, negative, 0, out.data()), keel::Error);
}

// The rows of all segments laid end to end, from global row `first` on: what a caller that no
// longer has the rows before `first` passes.
std::vector<kv::KvSpan> spans_from(const std::vector<Segment>& segs, int64_t first) {
  std::vector<kv::KvSpan> spans;
  int64_t at = 0;
  for (const Segment& s : segs) {
    const int64_t begin = std::max<int64_t>(first - at, 0);
    if (begin < s.count) spans.push_back(s.span(begin, s.count - begin));
    at += s.count;
  }
  return spans;
}

int64_t total_rows(const std::vector<Segment>& segs) {
  int64_t n = 0;
  for (const Segment& s : segs) n += s.count;
  return n;
}

double max_diff(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0;
  for (size_t d = 0; d < got.size(); ++d) worst = std::max(worst, std::fabs(got[d] - want[d]));
  return worst;
}

TEST(KvAttention, SlidingWindowReadsOnlyTheLastPositions) {
  std::mt19937 rng(21);
  const int64_t dim = 64;
  const auto segs = mixed_segments(rng, dim);
  const int64_t total = total_rows(segs);
  const auto q = random_query(rng, dim, 1.5f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  for (int64_t window : {int64_t{1}, int64_t{5}, int64_t{16}, int64_t{17}, int64_t{100}, total - 1, total, total + 50}) {
    for (int64_t first_pos : {0, 7}) {
      const AttentionParams p{.scale = scale, .window = window};
      const auto got = attend(q, p, whole(segs), first_pos);
      EXPECT_LT(max_diff(got, reference(q, p, segs, first_pos)), 1e-5)
          << "window " << window << " first_pos " << first_pos;
    }
  }
  // A window of one is the query's own row: its value.
  const auto own = attend(q, {.scale = scale, .window = 1}, whole(segs));
  for (int64_t d = 0; d < dim; ++d) EXPECT_EQ(own[d], segs.back().v[static_cast<size_t>((segs.back().count - 1) * dim + d)]);
  // The window really leaves rows out: 100 positions differ from all of them.
  const auto all = reference(q, scale, segs);
  EXPECT_GT(max_diff(attend(q, {.scale = scale, .window = 100}, whole(segs)), all), 1e-3);
}

TEST(KvAttention, RowsBeforeTheWindowChangeNoBits) {
  std::mt19937 rng(22);
  const int64_t dim = 128;
  const auto segs = mixed_segments(rng, dim);
  const int64_t last = total_rows(segs) - 1;
  const auto q = random_query(rng, dim, 2.0f);
  for (int64_t window : {20, 33, 100}) {
    const AttentionParams p{.scale = 0.1f, .window = window};
    const int64_t start = last - window + 1;
    const auto base = attend(q, p, whole(segs));
    // Spans that start at the window, a few rows before it, at its block, or near the beginning.
    for (int64_t from : {start, start - 5, start / 16 * 16, int64_t{1}})
      EXPECT_TRUE(same_bits(attend(q, p, spans_from(segs, from), from), base)) << "window " << window << " from " << from;
    for (int trial = 0; trial < 10; ++trial)
      EXPECT_TRUE(same_bits(attend(q, p, random_split(rng, segs)), base)) << "window " << window;
    // The same rows a whole number of tiles later in the sequence: the same tiles, the same bits.
    EXPECT_TRUE(same_bits(attend(q, p, whole(segs), 64), base));
  }
}

TEST(KvAttention, SoftcapSquashesScoresBeforeTheSoftmax) {
  std::mt19937 rng(23);
  const int64_t dim = 64;
  const auto segs = mixed_segments(rng, dim);
  const auto q = random_query(rng, dim, 6.0f);  // scores of tens: the cap matters
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  for (float cap : {2.0f, 5.0f, 30.0f}) {
    const AttentionParams p{.scale = scale, .softcap = cap};
    const auto got = attend(q, p, whole(segs));
    EXPECT_LT(max_diff(got, reference(q, p, segs)), 1e-5) << "softcap " << cap;
  }
  const auto capped = attend(q, {.scale = scale, .softcap = 2.0f}, whole(segs));
  EXPECT_GT(max_diff(capped, reference(q, scale, segs)), 1e-2);
}

TEST(KvAttention, SinkTakesWeightFromTheRowsOnly) {
  std::mt19937 rng(24);
  const int64_t dim = 64;
  const auto segs = mixed_segments(rng, dim);
  const auto q = random_query(rng, dim, 1.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  for (float sink : {-2.0f, 0.5f, 3.0f}) {
    const AttentionParams p{.scale = scale, .has_sink = true, .sink = sink};
    EXPECT_LT(max_diff(attend(q, p, whole(segs)), reference(q, p, segs)), 1e-5) << sink;
  }
  // A sink far above every score takes (almost) all the weight: the output goes to zero.
  for (float x : attend(q, {.scale = scale, .has_sink = true, .sink = 60.0f}, whole(segs))) EXPECT_LT(std::fabs(x), 1e-12f);
  // A sink far below every score takes none: the same bits as no sink at all.
  EXPECT_TRUE(same_bits(attend(q, {.scale = scale, .has_sink = true, .sink = -1e30f}, whole(segs)),
                        attend(q, {.scale = scale}, whole(segs))));
  // No rows: zeros, sink or not.
  for (float x : attend(q, {.scale = scale, .has_sink = true, .sink = 1.0f}, {})) EXPECT_EQ(x, 0.0f);
}

TEST(KvAttention, WindowSoftcapAndSinkTogetherStaySplitInvariant) {
  std::mt19937 rng(25);
  const int64_t dim = 128;
  const auto segs = mixed_segments(rng, dim);
  const auto q = random_query(rng, dim, 3.0f);
  const AttentionParams p{.scale = 1.0f / std::sqrt(128.0f), .window = 50, .softcap = 8.0f, .has_sink = true, .sink = 1.5f};
  const auto base = attend(q, p, whole(segs));
  EXPECT_LT(max_diff(base, reference(q, p, segs)), 1e-5);
  const int64_t start = total_rows(segs) - 50;
  EXPECT_TRUE(same_bits(attend(q, p, spans_from(segs, start), start), base));
  for (int trial = 0; trial < 10; ++trial) EXPECT_TRUE(same_bits(attend(q, p, random_split(rng, segs)), base));
}

// The kernels are compiled once per SIMD target (AVX-512, AVX2, SSE4, scalar ...) and one is chosen
// at run time; every one this CPU can run must agree with the reference and be split-invariant.
TEST(KvAttention, EverySimdTargetMatchesTheReferenceAndIsSplitInvariant) {
  std::mt19937 rng(17);
  const int64_t dim = 128;
  const auto segs = mixed_segments(rng, dim);
  const auto q = random_query(rng, dim, 1.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  const auto want = reference(q, scale, segs);
  const auto targets = hwy::SupportedAndGeneratedTargets();
  EXPECT_TRUE(std::any_of(targets.begin(), targets.end(),  // at least one SIMD target (NEON alone on ARM)
                          [](int64_t t) { return t != HWY_SCALAR && t != HWY_EMU128; }));
  for (int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    std::vector<float> base(dim), split(dim);
    kv::attend_spans(q.data(), dim, {.scale = scale}, whole(segs), 0, base.data());
    for (int64_t d = 0; d < dim; ++d) EXPECT_NEAR(base[d], want[d], 1e-5) << hwy::TargetName(target);
    for (int trial = 0; trial < 5; ++trial) {
      kv::attend_spans(q.data(), dim, {.scale = scale}, random_split(rng, segs), 0, split.data());
      EXPECT_EQ(std::memcmp(base.data(), split.data(), dim * sizeof(float)), 0) << hwy::TargetName(target);
    }
  }
  hwy::SetSupportedTargetsForTest(0);  // back to what the CPU supports
}

// The tiled path: queries at different positions (a prefill chunk) and heads (a KV group) in one
// call each get the bits they get alone, over only the rows up to their own position, under a
// sliding window, soft-cap and per-query sinks, on every SIMD target. Head dims of 64 and 96: the
// kernels take the head dim in passes of 2 or 4 vectors, and 96 leaves a remainder on some targets.
TEST(KvAttention, QueriesInOneCallGetWhatEachGetsAlone) {
  std::mt19937 rng(23);
  const int64_t rows = 363, first_pos = 5;
  for (const int64_t dim : {int64_t{64}, int64_t{96}})
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    const auto segs = mixed_segments(rng, dim);
    hwy::SetSupportedTargetsForTest(target);
    for (const AttentionParams& base :
         {AttentionParams{.scale = 0.125f}, AttentionParams{.scale = 0.125f, .window = 40, .softcap = 5.0f},
          AttentionParams{.scale = 0.125f, .window = 100, .has_sink = true}}) {
      std::vector<std::vector<float>> qs, together;
      std::vector<keel::ops::AttentionQuery> queries;
      std::vector<float> sinks;
      for (int i = 0; i < 23; ++i) {
        qs.push_back(random_query(rng, dim, 1.0f));
        together.emplace_back(dim);
        sinks.push_back(std::uniform_real_distribution<float>(-2.0f, 4.0f)(rng));
      }
      for (int i = 0; i < 23; ++i) {
        // Runs of rows at consecutive positions, several heads each, and a few stragglers.
        const int64_t pos = i < 18 ? 300 + i / 3 : std::uniform_int_distribution<int64_t>(first_pos, first_pos + rows - 1)(rng);
        queries.push_back({.q = qs[i].data(), .pos = pos, .sink = sinks[i], .out = together[i].data()});
      }
      kv::attend_spans(dim, base, random_split(rng, segs), first_pos, queries);
      for (int i = 0; i < 23; ++i) {
        // Alone, over exactly the rows up to its position.
        std::vector<kv::KvSpan> upto;
        int64_t left = queries[i].pos - first_pos + 1;
        for (const Segment& s : segs) {
          if (left == 0) break;
          const int64_t n = std::min(left, s.count);
          upto.push_back(s.span(0, n));
          left -= n;
        }
        AttentionParams alone = base;
        alone.sink = sinks[i];
        EXPECT_TRUE(same_bits(attend(qs[i], alone, upto, first_pos), together[i]))
            << hwy::TargetName(target) << " query " << i << " at " << queries[i].pos << " window " << base.window;
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST(KvAttention, AQueryOutsideTheRowsThrows) {
  std::mt19937 rng(24);
  const auto segs = mixed_segments(rng, 64);
  const auto q = random_query(rng, 64, 1.0f);
  std::vector<float> out(64);
  const keel::ops::AttentionQuery late{.q = q.data(), .pos = 363, .out = out.data()};
  EXPECT_THROW(kv::attend_spans(64, {.scale = 1.0f}, whole(segs), 0, std::span(&late, 1)), keel::Error);
}
