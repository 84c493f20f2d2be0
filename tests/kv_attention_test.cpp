// attend_spans: agreement with a double-precision reference over the decoded rows, for mixed
// formats and rotations, and bit-identical results however the rows are split into spans.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "hwy/targets.h"
#include "keel/kv/kv_attention.h"
#include "keel/util/error.h"

using keel::KvFormat;
namespace kv = keel::kv;

namespace {

// Rows of one format and rotation, K and V interleaved in one buffer the way a pool block might
// hold them: row i's key at i * stride, its value at i * stride + row_bytes.
struct Segment {
  KvFormat format;
  bool rotated;
  int64_t count;
  size_t stride;
  std::vector<uint8_t> bytes;
  std::vector<float> k, v;  // decoded, for the reference

  kv::KvSpan span(int64_t first, int64_t n) const {
    const uint8_t* base = bytes.data() + static_cast<size_t>(first) * stride;
    return {format, rotated, base, base + kv::row_bytes(format, static_cast<int64_t>(k.size() / count)), n, stride};
  }
};

Segment make_segment(std::mt19937& rng, KvFormat f, bool rotated, int64_t count, int64_t dim) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Segment s{f, rotated, count, 2 * kv::row_bytes(f, dim) + 8, {}, {}, {}};  // 8 bytes of padding per row
  s.bytes.assign(s.stride * static_cast<size_t>(count), 0);
  s.k.resize(static_cast<size_t>(count * dim));
  s.v.resize(static_cast<size_t>(count * dim));
  std::vector<float> k(static_cast<size_t>(dim)), v(static_cast<size_t>(dim));
  for (int64_t i = 0; i < count; ++i) {
    for (int64_t d = 0; d < dim; ++d) {
      k[d] = normal(rng) * (d % 17 == 3 ? 6.0f : 1.0f);  // a few outlier channels, as real keys have
      v[d] = normal(rng) + 0.3f;
    }
    uint8_t* row = s.bytes.data() + static_cast<size_t>(i) * s.stride;
    kv::encode_row(f, k.data(), dim, rotated, row);
    kv::encode_row(f, v.data(), dim, rotated, row + kv::row_bytes(f, dim));
    kv::decode_row(f, row, dim, rotated, s.k.data() + i * dim);
    kv::decode_row(f, row + kv::row_bytes(f, dim), dim, rotated, s.v.data() + i * dim);
  }
  return s;
}

// The query as quantized keys see it (kv_attention.h): rounded per group of 32 to the int16 grid
// of the group's largest |q|, in the basis of the keys (rotated or not); bf16 keys see q itself.
std::vector<double> rounded_query(const std::vector<float>& q, bool rotated) {
  std::vector<float> r = q;
  if (rotated) kv::rotate_row(r.data(), static_cast<int64_t>(r.size()));
  std::vector<double> out(r.size());
  for (size_t g = 0; g < r.size(); g += 32) {
    float amax = 0;
    for (size_t i = g; i < g + 32; ++i) amax = std::max(amax, std::fabs(r[i]));
    const double step = amax / 32767.0f;
    for (size_t i = g; i < g + 32; ++i) out[i] = step > 0 ? std::nearbyint(r[i] / step) * step : 0.0;
  }
  if (rotated) {  // back to the original basis, where the decoded keys live (in double)
    std::vector<double> x = out;
    const size_t n = x.size() & -x.size();
    for (size_t b = 0; b < x.size(); b += n) {
      for (size_t h = 1; h < n; h *= 2)
        for (size_t i = b; i < b + n; i += 2 * h)
          for (size_t j = i; j < i + h; ++j) {
            const double a = x[j], c = x[j + h];
            x[j] = a + c;
            x[j + h] = a - c;
          }
      for (size_t i = b; i < b + n; ++i) x[i] /= std::sqrt(static_cast<double>(n));
    }
    out = x;
  }
  return out;
}

// Exact softmax attention in double over the decoded rows; with model_q_rounding, quantized keys
// see the rounded query as the kernel documents, which leaves only float rounding between the two.
std::vector<double> reference(const std::vector<float>& q, float scale, const std::vector<Segment>& segs,
                              bool model_q_rounding = false) {
  const size_t dim = q.size();
  std::vector<double> scores;
  std::vector<const float*> values;
  for (const Segment& s : segs) {
    std::vector<double> qs(q.begin(), q.end());
    if (model_q_rounding && s.format != KvFormat::BF16) qs = rounded_query(q, s.rotated);
    for (int64_t i = 0; i < s.count; ++i) {
      double dot = 0;
      for (size_t d = 0; d < dim; ++d) dot += qs[d] * s.k[i * dim + d];
      scores.push_back(dot * scale);
      values.push_back(s.v.data() + i * dim);
    }
  }
  double mx = -INFINITY;
  for (double x : scores) mx = std::max(mx, x);
  double sum = 0;
  std::vector<double> out(dim, 0.0);
  for (size_t j = 0; j < scores.size(); ++j) {
    const double p = std::exp(scores[j] - mx);
    sum += p;
    for (size_t d = 0; d < dim; ++d) out[d] += p * values[j][d];
  }
  for (double& o : out) o /= sum;
  return out;
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
      const auto modelled = reference(q, scale, segs, /*model_q_rounding=*/true);
      std::vector<float> got(static_cast<size_t>(dim));
      kv::attend_spans(q.data(), dim, scale, whole(segs), got.data());
      double worst_exact = 0, worst_modelled = 0;
      for (int64_t d = 0; d < dim; ++d) {
        worst_exact = std::max(worst_exact, std::fabs(got[d] - exact[d]));
        worst_modelled = std::max(worst_modelled, std::fabs(got[d] - modelled[d]));
      }
      // Rounding q to int16 moves scores by ~1e-5 of their size (observed: up to 7e-5 here, against
      // values of spread ~1); the int8 keys themselves are 1/254 off, so this costs nothing visible.
      EXPECT_LT(worst_exact, 3e-4) << "dim " << dim << " spread " << spread;
      // Only float rounding is left against the reference that rounds q the same way.
      EXPECT_LT(worst_modelled, 1e-5) << "dim " << dim << " spread " << spread;
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
        const auto want = reference(q, scale, segs, /*model_q_rounding=*/true);
        std::vector<float> got(static_cast<size_t>(dim));
        kv::attend_spans(q.data(), dim, scale, whole(segs), got.data());
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
    kv::attend_spans(q.data(), dim, scale, whole(segs), base.data());
    for (int trial = 0; trial < 30; ++trial) {
      const auto spans = random_split(rng, segs);
      kv::attend_spans(q.data(), dim, scale, spans, other.data());
      ASSERT_EQ(std::memcmp(base.data(), other.data(), base.size() * sizeof(float)), 0)
          << "dim " << dim << " split into " << spans.size() << " spans";
    }
    // One row per span.
    std::vector<kv::KvSpan> singles;
    for (const Segment& s : segs)
      for (int64_t i = 0; i < s.count; ++i) singles.push_back(s.span(i, 1));
    kv::attend_spans(q.data(), dim, scale, singles, other.data());
    EXPECT_EQ(std::memcmp(base.data(), other.data(), base.size() * sizeof(float)), 0);
  }
}

TEST(KvAttention, SameBitsFromConcurrentThreads) {
  std::mt19937 rng(14);
  const int64_t dim = 128;
  const auto segs = mixed_segments(rng, dim);
  const auto q = random_query(rng, dim, 1.0f);
  std::vector<float> base(dim);
  kv::attend_spans(q.data(), dim, 0.09f, whole(segs), base.data());
  std::vector<std::vector<float>> outs(4, std::vector<float>(dim));
  std::vector<std::thread> threads;
  for (auto& o : outs)
    threads.emplace_back([&] {
      for (int rep = 0; rep < 20; ++rep) kv::attend_spans(q.data(), dim, 0.09f, whole(segs), o.data());
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
    kv::attend_spans(q.data(), 64, 0.125f, whole(segs), got.data());
    for (int d = 0; d < 64; ++d) EXPECT_EQ(got[d], segs[0].v[d]) << keel::kv_format_name(f);
  }
}

TEST(KvAttention, LargeScoresStayFinite) {
  std::mt19937 rng(16);
  const auto segs = mixed_segments(rng, 64);
  const auto q = random_query(rng, 64, 50.0f);  // scores in the hundreds: a naive exp overflows
  const auto want = reference(q, 1.0f, segs, /*model_q_rounding=*/true);
  std::vector<float> got(64);
  kv::attend_spans(q.data(), 64, 1.0f, whole(segs), got.data());
  for (int d = 0; d < 64; ++d) {
    ASSERT_TRUE(std::isfinite(got[d]));
    EXPECT_NEAR(got[d], want[d], 1e-4);
  }
}

TEST(KvAttention, NoRowsGiveZerosAndBadArgumentsThrow) {
  std::vector<float> q(64, 1.0f), out(64, 5.0f);
  kv::attend_spans(q.data(), 64, 1.0f, {}, out.data());
  for (float x : out) EXPECT_EQ(x, 0.0f);
  std::vector<uint8_t> row(256);
  const kv::KvSpan bad_dim[] = {{KvFormat::Int8, false, row.data(), row.data(), 1, 100}};
  EXPECT_THROW(kv::attend_spans(q.data(), 48, 1.0f, bad_dim, out.data()), keel::Error);
  const kv::KvSpan negative[] = {{KvFormat::BF16, false, row.data(), row.data(), -1, 100}};
  EXPECT_THROW(kv::attend_spans(q.data(), 64, 1.0f, negative, out.data()), keel::Error);
}

// The kernels are compiled once per SIMD target (AVX-512, AVX2, SSE4, scalar ...) and one is chosen
// at run time; every one this CPU can run must agree with the reference and be split-invariant.
TEST(KvAttention, EverySimdTargetMatchesTheReferenceAndIsSplitInvariant) {
  std::mt19937 rng(17);
  const int64_t dim = 128;
  const auto segs = mixed_segments(rng, dim);
  const auto q = random_query(rng, dim, 1.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  const auto want = reference(q, scale, segs, /*model_q_rounding=*/true);
  const auto targets = hwy::SupportedAndGeneratedTargets();
  EXPECT_GE(targets.size(), 2u);  // at least one SIMD target besides the scalar fallback
  for (int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    std::vector<float> base(dim), split(dim);
    kv::attend_spans(q.data(), dim, scale, whole(segs), base.data());
    for (int64_t d = 0; d < dim; ++d) EXPECT_NEAR(base[d], want[d], 1e-5) << hwy::TargetName(target);
    for (int trial = 0; trial < 5; ++trial) {
      kv::attend_spans(q.data(), dim, scale, random_split(rng, segs), split.data());
      EXPECT_EQ(std::memcmp(base.data(), split.data(), dim * sizeof(float)), 0) << hwy::TargetName(target);
    }
  }
  hwy::SetSupportedTargetsForTest(0);  // back to what the CPU supports
}
