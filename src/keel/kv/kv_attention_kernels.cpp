// The tile loop of attend_spans, compiled by Highway once per SIMD target and chosen at run time
// (see keel/ops/simd_kernels.cpp). A tile's scores are kept with one lane per key position, so a
// query's dot products need no horizontal sums: each lane is one fused multiply-add chain over the
// head dim, the same chain whatever else is in the call.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "keel/kv/kv_attention_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "keel/kv/kv_attention_kernels.h"
#include "keel/kv/kv_format_layout.h"

HWY_BEFORE_NAMESPACE();
namespace keel::kv::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// scores[i * kTile + j] = dot(q_i, key j) for four queries: per lane one FMA chain over d, the
// same chain ScoreOne runs, so a query's scores do not depend on its neighbours.
HWY_INLINE void ScoreFour(const float* kt, int64_t dim, const float* q0, const float* q1, const float* q2,
                          const float* q3, float* scores) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  for (int64_t c = 0; c < kTile; c += N) {
    auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
    for (int64_t d = 0; d < dim; ++d) {
      const auto k = hn::LoadU(df, kt + d * kTile + c);
      a0 = hn::MulAdd(hn::Set(df, q0[d]), k, a0);
      a1 = hn::MulAdd(hn::Set(df, q1[d]), k, a1);
      a2 = hn::MulAdd(hn::Set(df, q2[d]), k, a2);
      a3 = hn::MulAdd(hn::Set(df, q3[d]), k, a3);
    }
    hn::StoreU(a0, df, scores + c);
    hn::StoreU(a1, df, scores + kTile + c);
    hn::StoreU(a2, df, scores + 2 * kTile + c);
    hn::StoreU(a3, df, scores + 3 * kTile + c);
  }
}

// The same chain as ScoreFour, for one query (the last one to three of a call).
HWY_INLINE void ScoreOne(const float* kt, int64_t dim, const float* q, float* scores) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  for (int64_t c = 0; c < kTile; c += N) {
    auto a = hn::Zero(df);
    for (int64_t d = 0; d < dim; ++d) a = hn::MulAdd(hn::Set(df, q[d]), hn::LoadU(df, kt + d * kTile + c), a);
    hn::StoreU(a, df, scores + c);
  }
}

// Scores -> softmax numerators on the query's lanes (0 elsewhere); returns the factor its sums so
// far must be multiplied by.
HWY_INLINE float SoftmaxStep(float* s, const TileQuery& q, float scale, float softcap) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int64_t c0 = q.lo / N * N;  // whole vectors covering [lo, hi)
  // lanes in [lo, hi): lane > lo - 1 and lane < hi
  const auto vlo = hn::Set(di, static_cast<int32_t>(q.lo - 1)), vhi = hn::Set(di, static_cast<int32_t>(q.hi));
  const auto neg_inf = hn::Set(df, -INFINITY);
  // Masking whole vectors of valid lanes would change nothing: skip it.
  const bool partial = q.lo % N != 0 || q.hi % N != 0;
  auto valid_at = [&](int64_t c) {
    const auto lane = hn::Iota(di, static_cast<int32_t>(c));
    return hn::RebindMask(df, hn::And(hn::Gt(lane, vlo), hn::Lt(lane, vhi)));
  };
  auto vmax = neg_inf;
  for (int64_t c = c0; c < q.hi; c += N) {
    auto x = hn::Mul(hn::LoadU(df, s + c), hn::Set(df, scale));
    if (softcap > 0.0f) x = hn::Mul(hn::Set(df, softcap), hn::Tanh(df, hn::Div(x, hn::Set(df, softcap))));
    if (partial) x = hn::IfThenElse(valid_at(c), x, neg_inf);
    hn::StoreU(x, df, s + c);
    vmax = hn::Max(vmax, x);
  }
  const float tile_max = hn::GetLane(hn::MaxOfLanes(df, vmax));
  float factor = 1.0f;
  if (tile_max > *q.running_max) {
    factor = std::exp(*q.running_max - tile_max);  // 0 on the first tile (exp(-inf))
    *q.running_max = tile_max;
  }
  const auto vm = hn::Set(df, *q.running_max);
  auto vsum = hn::Zero(df);
  for (int64_t c = c0; c < q.hi; c += N) {
    auto e = hn::Exp(df, hn::Sub(hn::LoadU(df, s + c), vm));
    if (partial) e = hn::IfThenElseZero(valid_at(c), e);
    hn::StoreU(e, df, s + c);
    vsum = hn::Add(vsum, e);
  }
  *q.running_sum = *q.running_sum * factor + hn::GetLane(hn::SumOfLanes(df, vsum));
  return factor;
}

// acc = acc * factor + sum over lanes j in [from, to) of p[j] * value j, j in order; four vectors
// of the head dim at a time, so four independent chains hide the FMA latency. factor 1 is exact.
HWY_INLINE void AccumulateRange(const float* vt, int64_t dim, const float* p, int64_t from, int64_t to, float factor,
                                float* acc) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto f = hn::Set(df, factor);
  int64_t d = 0;
  for (; d + 4 * N <= dim; d += 4 * N) {
    auto a0 = hn::Mul(hn::LoadU(df, acc + d), f), a1 = hn::Mul(hn::LoadU(df, acc + d + N), f);
    auto a2 = hn::Mul(hn::LoadU(df, acc + d + 2 * N), f), a3 = hn::Mul(hn::LoadU(df, acc + d + 3 * N), f);
    for (int64_t j = from; j < to; ++j) {
      const float* row = vt + j * dim + d;
      const auto w = hn::Set(df, p[j]);
      a0 = hn::MulAdd(w, hn::LoadU(df, row), a0);
      a1 = hn::MulAdd(w, hn::LoadU(df, row + N), a1);
      a2 = hn::MulAdd(w, hn::LoadU(df, row + 2 * N), a2);
      a3 = hn::MulAdd(w, hn::LoadU(df, row + 3 * N), a3);
    }
    hn::StoreU(a0, df, acc + d);
    hn::StoreU(a1, df, acc + d + N);
    hn::StoreU(a2, df, acc + d + 2 * N);
    hn::StoreU(a3, df, acc + d + 3 * N);
  }
  for (; d + N <= dim; d += N) {
    auto a = hn::Mul(hn::LoadU(df, acc + d), f);
    for (int64_t j = from; j < to; ++j) a = hn::MulAdd(hn::Set(df, p[j]), hn::LoadU(df, vt + j * dim + d), a);
    hn::StoreU(a, df, acc + d);
  }
  for (; d < dim; ++d) {
    float a = acc[d] * factor;
    for (int64_t j = from; j < to; ++j) a = std::fma(p[j], vt[j * dim + d], a);
    acc[d] = a;
  }
}

// Each accumulator is rescaled exactly once per tile (fused into its first run, alone when none of
// its lanes is read), then takes its runs' lanes in order: the same operations however the tile's
// rows are split between the two bases.
HWY_INLINE void AccumulateStep(const float* vt, int64_t dim, const float* p, const LaneRun* runs, int64_t n_runs,
                               const TileQuery& q, float factor) {
  bool plain_done = false, rotated_done = false;
  for (int64_t r = 0; r < n_runs; ++r) {
    const int64_t from = std::max(runs[r].lo, q.lo), to = std::min(runs[r].hi, q.hi);
    if (from >= to) continue;
    bool& done = runs[r].rotated ? rotated_done : plain_done;
    AccumulateRange(vt, dim, p, from, to, done ? 1.0f : factor, runs[r].rotated ? q.acc_rot : q.acc);
    done = true;
  }
  if (factor != 1.0f) {
    if (!plain_done) AccumulateRange(vt, dim, p, 0, 0, factor, q.acc);
    if (q.acc_rot != nullptr && !rotated_done) AccumulateRange(vt, dim, p, 0, 0, factor, q.acc_rot);
  }
}

void UnrotateKeys(float* kt, int64_t dim) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int64_t block = dim & -dim;  // as rotate_row: the largest power of two dividing dim
  const auto norm = hn::Set(df, static_cast<float>(1.0 / std::sqrt(static_cast<double>(block))));
  for (int64_t b0 = 0; b0 < dim; b0 += block) {
    for (int64_t h = 1; h < block; h *= 2)
      for (int64_t i = b0; i < b0 + block; i += 2 * h)
        for (int64_t j = i; j < i + h; ++j) {
          float* x = kt + j * kTile;
          float* y = kt + (j + h) * kTile;
          for (int64_t c = 0; c < kTile; c += N) {
            const auto a = hn::LoadU(df, x + c), b = hn::LoadU(df, y + c);
            hn::StoreU(hn::Add(a, b), df, x + c);
            hn::StoreU(hn::Sub(a, b), df, y + c);
          }
        }
    for (int64_t d = b0; d < b0 + block; ++d)
      for (int64_t c = 0; c < kTile; c += N) hn::StoreU(hn::Mul(hn::LoadU(df, kt + d * kTile + c), norm), df, kt + d * kTile + c);
  }
}

void AttendTile(const float* kt, const float* vt, int64_t dim, const LaneRun* runs, int64_t n_runs,
                const TileQuery* queries, int64_t n_queries, float scale, float softcap, float* scores) {
  for (int64_t i0 = 0; i0 < n_queries; i0 += 4) {
    if (i0 + 4 <= n_queries) {
      ScoreFour(kt, dim, queries[i0].q, queries[i0 + 1].q, queries[i0 + 2].q, queries[i0 + 3].q, scores);
    } else {
      for (int64_t i = i0; i < n_queries; ++i) ScoreOne(kt, dim, queries[i].q, scores + (i - i0) * kTile);
    }
    for (int64_t i = i0; i < std::min(i0 + 4, n_queries); ++i) {
      float* p = scores + (i - i0) * kTile;
      const float factor = SoftmaxStep(p, queries[i], scale, softcap);
      AccumulateStep(vt, dim, p, runs, n_runs, queries[i], factor);
    }
  }
}

// Keys are transposed two dims at a time, as 32-bit bf16 pairs (dim d in the low half, d + 1 in
// the high half). On x86 from AVX2 up, eight rows' pairs are loaded four at a time and transposed
// with interleaves, a 4 x 4 transpose in each 128-bit block of a 256-bit vector (rows r .. r + 3
// in the lower block, r + 4 .. r + 7 in the upper): a gather of eight lanes costs more than the
// transposition. Elsewhere (and for the dims past a multiple of 8) a vector of rows is gathered
// per pair.
template <class D>
HWY_INLINE void StorePair(D di, hn::Vec<D> pair, int64_t d, int64_t r, float* kt) {
  const hn::Rebind<float, D> df;
  hn::StoreU(hn::BitCast(df, hn::ShiftLeft<16>(pair)), df, kt + d * kTile + r);
  hn::StoreU(hn::BitCast(df, hn::And(pair, hn::Set(di, static_cast<int32_t>(0xFFFF0000u)))), df, kt + (d + 1) * kTile + r);
}

void WidenBf16Keys(const uint8_t* rows, size_t stride, int64_t n, int64_t dim, float* kt) {
  const hn::ScalableTag<int32_t> di;
  const int64_t N = static_cast<int64_t>(hn::Lanes(di));
  const auto offsets = hn::Mul(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(stride)));
  int64_t r = 0;
  for (; r + N <= n && dim % 2 == 0; r += N) {
    const uint8_t* base = rows + static_cast<size_t>(r) * stride;
    int64_t d = 0;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
    const hn::CappedTag<int32_t, 8> d8;  // 256 bits
    const hn::Half<decltype(d8)> d4;
    const hn::Repartition<int64_t, decltype(d8)> d64;
    if (N % 8 == 0) {
      for (; d + 8 <= dim; d += 8)
        for (int64_t g = 0; g < N; g += 8) {
          auto two_rows = [&](int64_t i) {  // row g + i's four pairs low, row g + i + 4's high
            return hn::Combine(d8, hn::LoadU(d4, reinterpret_cast<const int32_t*>(base + (g + i + 4) * stride + 2 * d)),
                               hn::LoadU(d4, reinterpret_cast<const int32_t*>(base + (g + i) * stride + 2 * d)));
          };
          const auto v0 = two_rows(0), v1 = two_rows(1), v2 = two_rows(2), v3 = two_rows(3);
          const auto t0 = hn::BitCast(d64, hn::InterleaveLower(d8, v0, v1));  // pairs 0, 1 of rows 0, 1
          const auto t1 = hn::BitCast(d64, hn::InterleaveUpper(d8, v0, v1));  // pairs 2, 3
          const auto t2 = hn::BitCast(d64, hn::InterleaveLower(d8, v2, v3));
          const auto t3 = hn::BitCast(d64, hn::InterleaveUpper(d8, v2, v3));
          StorePair(d8, hn::BitCast(d8, hn::InterleaveLower(d64, t0, t2)), d, r + g, kt);
          StorePair(d8, hn::BitCast(d8, hn::InterleaveUpper(d64, t0, t2)), d + 2, r + g, kt);
          StorePair(d8, hn::BitCast(d8, hn::InterleaveLower(d64, t1, t3)), d + 4, r + g, kt);
          StorePair(d8, hn::BitCast(d8, hn::InterleaveUpper(d64, t1, t3)), d + 6, r + g, kt);
        }
    }
#endif
    for (; d < dim; d += 2)
      StorePair(di, hn::GatherOffset(di, reinterpret_cast<const int32_t*>(base + 2 * d), offsets), d, r, kt);
  }
  for (; r < n; ++r) {
    const uint8_t* row = rows + static_cast<size_t>(r) * stride;
    for (int64_t d = 0; d < dim; ++d) {
      uint16_t bits;
      std::memcpy(&bits, row + 2 * d, 2);
      const uint32_t wide = static_cast<uint32_t>(bits) << 16;
      std::memcpy(kt + d * kTile + r, &wide, 4);
    }
  }
}

void WidenBf16Values(const uint8_t* rows, size_t stride, int64_t n, int64_t dim, float* vt) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du32;
  const hn::Rebind<uint16_t, decltype(df)> du16;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  for (int64_t r = 0; r < n; ++r) {
    const auto* row = reinterpret_cast<const uint16_t*>(rows + static_cast<size_t>(r) * stride);
    float* out = vt + r * dim;
    int64_t d = 0;
    for (; d + N <= dim; d += N)
      hn::StoreU(hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, row + d)))), df, out + d);
    for (; d < dim; ++d) {
      uint16_t bits;
      std::memcpy(&bits, row + d, 2);
      const uint32_t wide = static_cast<uint32_t>(bits) << 16;
      std::memcpy(out + d, &wide, 4);
    }
  }
}

HWY_INLINE float LoadBf16(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &wide, 4);
  return f;
}

void WidenQuantizedRow(KvFormat format, const uint8_t* row, int64_t dim, float* out) {
  constexpr int64_t kGroup = kKvQuantGroup;
  const int64_t groups = dim / kGroup;
  if (format == KvFormat::Int8) {
    const hn::CappedTag<float, kGroup> df;
    const hn::Rebind<int32_t, decltype(df)> di32;
    const hn::Rebind<int8_t, decltype(df)> di8;
    const int64_t N = static_cast<int64_t>(hn::Lanes(df));
    const uint8_t* meta = row + layout::meta_offset(format, dim);
    for (int64_t g = 0; g < groups; ++g) {
      const auto s = hn::Set(df, LoadBf16(meta + 2 * g));
      for (int64_t i = 0; i < kGroup; i += N) {
        const auto c = hn::PromoteTo(di32, hn::LoadU(di8, reinterpret_cast<const int8_t*>(row) + g * kGroup + i));
        hn::StoreU(hn::Mul(s, hn::ConvertTo(df, c)), df, out + g * kGroup + i);
      }
    }
    return;
  }
  // Affine: x = m + s c. int4: byte j of a group holds codes j and j + 16; int2: codes j, j + 8,
  // j + 16 and j + 24 at bits 0, 2, 4, 6.
  const int bits = format == KvFormat::Int4 ? 4 : 2;
  const int64_t per = kGroup * bits / 8;  // code bytes per group: 16 or 8
  const hn::CappedTag<float, 8> df;      // at most 8 lanes: a group's int2 bytes
  const hn::Rebind<int32_t, decltype(df)> di32;
  const hn::Rebind<uint8_t, decltype(df)> du8;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto mask = hn::Set(di32, (1 << bits) - 1);
  const uint8_t* meta = row + layout::meta_offset(format, dim);
  for (int64_t g = 0; g < groups; ++g) {
    const auto s = hn::Set(df, LoadBf16(meta + 4 * g)), m = hn::Set(df, LoadBf16(meta + 4 * g + 2));
    const uint8_t* codes = row + g * per;
    float* o = out + g * kGroup;
    for (int64_t j = 0; j < per; j += N) {
      const auto b = hn::PromoteTo(di32, hn::LoadU(du8, codes + j));
      for (int shift = 0, k = 0; shift < 8; shift += bits, ++k) {
        const auto c = hn::And(hn::ShiftRightSame(b, shift), mask);
        hn::StoreU(hn::MulAdd(s, hn::ConvertTo(df, c), m), df, o + k * per + j);
      }
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace keel::kv::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace keel::kv::kernels {

HWY_EXPORT(AttendTile);
HWY_EXPORT(UnrotateKeys);
HWY_EXPORT(WidenQuantizedRow);

void widen_quantized_row(KvFormat format, const uint8_t* row, int64_t dim, float* out) {
  HWY_DYNAMIC_DISPATCH(WidenQuantizedRow)(format, row, dim, out);
}
HWY_EXPORT(WidenBf16Keys);
HWY_EXPORT(WidenBf16Values);

void widen_bf16_keys(const uint8_t* rows, size_t stride, int64_t n, int64_t dim, float* kt) {
  HWY_DYNAMIC_DISPATCH(WidenBf16Keys)(rows, stride, n, dim, kt);
}

void widen_bf16_values(const uint8_t* rows, size_t stride, int64_t n, int64_t dim, float* vt) {
  HWY_DYNAMIC_DISPATCH(WidenBf16Values)(rows, stride, n, dim, vt);
}

void attend_tile(const float* kt, const float* vt, int64_t dim, const LaneRun* runs, int64_t n_runs,
                 const TileQuery* queries, int64_t n_queries, float scale, float softcap, float* scores) {
  HWY_DYNAMIC_DISPATCH(AttendTile)(kt, vt, dim, runs, n_runs, queries, n_queries, scale, softcap, scores);
}

void unrotate_keys(float* kt, int64_t dim) { HWY_DYNAMIC_DISPATCH(UnrotateKeys)(kt, dim); }

}  // namespace keel::kv::kernels
#endif
