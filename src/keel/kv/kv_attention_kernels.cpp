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

// acc = acc * factor + sum over the query's lanes j of p[j] * value j, j in order; four vectors of
// the head dim at a time, so four independent chains hide the FMA latency.
HWY_INLINE void AccumulateStep(const float* vt, int64_t dim, const float* p, const TileQuery& q, float factor) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto f = hn::Set(df, factor);
  float* acc = q.acc;
  int64_t d = 0;
  for (; d + 4 * N <= dim; d += 4 * N) {
    auto a0 = hn::Mul(hn::LoadU(df, acc + d), f), a1 = hn::Mul(hn::LoadU(df, acc + d + N), f);
    auto a2 = hn::Mul(hn::LoadU(df, acc + d + 2 * N), f), a3 = hn::Mul(hn::LoadU(df, acc + d + 3 * N), f);
    for (int64_t j = q.lo; j < q.hi; ++j) {
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
    for (int64_t j = q.lo; j < q.hi; ++j) a = hn::MulAdd(hn::Set(df, p[j]), hn::LoadU(df, vt + j * dim + d), a);
    hn::StoreU(a, df, acc + d);
  }
  for (; d < dim; ++d) {
    float a = acc[d] * factor;
    for (int64_t j = q.lo; j < q.hi; ++j) a = std::fma(p[j], vt[j * dim + d], a);
    acc[d] = a;
  }
}

void AttendTile(const float* kt, const float* vt, int64_t dim, const TileQuery* queries, int64_t n_queries,
                float scale, float softcap, float* scores) {
  for (int64_t i0 = 0; i0 < n_queries; i0 += 4) {
    if (i0 + 4 <= n_queries) {
      ScoreFour(kt, dim, queries[i0].q, queries[i0 + 1].q, queries[i0 + 2].q, queries[i0 + 3].q, scores);
    } else {
      for (int64_t i = i0; i < n_queries; ++i) ScoreOne(kt, dim, queries[i].q, scores + (i - i0) * kTile);
    }
    for (int64_t i = i0; i < std::min(i0 + 4, n_queries); ++i) {
      float* p = scores + (i - i0) * kTile;
      const float factor = SoftmaxStep(p, queries[i], scale, softcap);
      AccumulateStep(vt, dim, p, queries[i], factor);
    }
  }
}

// Keys are gathered a vector of rows at a time, two dims per 32-bit gather (a bf16 pair: dim d in
// the low half, d + 1 in the high half), so the transposition costs one gather per 2N values.
void WidenBf16Keys(const uint8_t* rows, size_t stride, int64_t n, int64_t dim, float* kt) {
  const hn::ScalableTag<int32_t> di;
  const hn::Rebind<float, decltype(di)> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(di));
  const auto offsets = hn::Mul(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(stride)));
  const auto high = hn::Set(di, static_cast<int32_t>(0xFFFF0000u));
  int64_t r = 0;
  for (; r + N <= n && dim % 2 == 0; r += N) {
    const uint8_t* base = rows + static_cast<size_t>(r) * stride;
    for (int64_t d = 0; d < dim; d += 2) {
      const auto pair = hn::GatherOffset(di, reinterpret_cast<const int32_t*>(base + 2 * d), offsets);
      hn::StoreU(hn::BitCast(df, hn::ShiftLeft<16>(pair)), df, kt + d * kTile + r);
      hn::StoreU(hn::BitCast(df, hn::And(pair, high)), df, kt + (d + 1) * kTile + r);
    }
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

}  // namespace HWY_NAMESPACE
}  // namespace keel::kv::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace keel::kv::kernels {

HWY_EXPORT(AttendTile);
HWY_EXPORT(WidenBf16Keys);
HWY_EXPORT(WidenBf16Values);

void widen_bf16_keys(const uint8_t* rows, size_t stride, int64_t n, int64_t dim, float* kt) {
  HWY_DYNAMIC_DISPATCH(WidenBf16Keys)(rows, stride, n, dim, kt);
}

void widen_bf16_values(const uint8_t* rows, size_t stride, int64_t n, int64_t dim, float* vt) {
  HWY_DYNAMIC_DISPATCH(WidenBf16Values)(rows, stride, n, dim, vt);
}

void attend_tile(const float* kt, const float* vt, int64_t dim, const TileQuery* queries, int64_t n_queries,
                 float scale, float softcap, float* scores) {
  HWY_DYNAMIC_DISPATCH(AttendTile)(kt, vt, dim, queries, n_queries, scale, softcap, scores);
}

}  // namespace keel::kv::kernels
#endif
