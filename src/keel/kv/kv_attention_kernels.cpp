// The tile loops of attend_spans, compiled by Highway once per SIMD target and chosen at run time
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

#include "keel/kv/kv_attention_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace keel::kv::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Four queries at a time share each load of the transposed keys; a missing fourth repeats the last
// query (its lanes are computed and dropped), so every query runs the very same chain.
void ScoreTile(const float* kt, int64_t dim, const float* const* q, int64_t n_queries, float* scores) {
  const hn::CappedTag<float, kTile> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  for (int64_t i0 = 0; i0 < n_queries; i0 += 4) {
    const int64_t last = n_queries - 1;
    const float* q0 = q[i0];
    const float* q1 = q[std::min(i0 + 1, last)];
    const float* q2 = q[std::min(i0 + 2, last)];
    const float* q3 = q[std::min(i0 + 3, last)];
    for (int64_t c = 0; c < kTile; c += N) {
      auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
      for (int64_t d = 0; d < dim; ++d) {
        const auto k = hn::LoadU(df, kt + d * kTile + c);
        a0 = hn::MulAdd(hn::Set(df, q0[d]), k, a0);
        a1 = hn::MulAdd(hn::Set(df, q1[d]), k, a1);
        a2 = hn::MulAdd(hn::Set(df, q2[d]), k, a2);
        a3 = hn::MulAdd(hn::Set(df, q3[d]), k, a3);
      }
      float* out = scores + i0 * kTile + c;
      hn::StoreU(a0, df, out);
      if (i0 + 1 < n_queries) hn::StoreU(a1, df, out + kTile);
      if (i0 + 2 < n_queries) hn::StoreU(a2, df, out + 2 * kTile);
      if (i0 + 3 < n_queries) hn::StoreU(a3, df, out + 3 * kTile);
    }
  }
}

float SoftmaxTile(float* s, int64_t lo, int64_t hi, float scale, float softcap, float* running_max,
                  float* running_sum) {
  const hn::CappedTag<float, kTile> df;
  const hn::RebindToSigned<decltype(df)> di;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  // lanes in [lo, hi): lane > lo - 1 and lane < hi
  const auto vlo = hn::Set(di, static_cast<int32_t>(lo - 1)), vhi = hn::Set(di, static_cast<int32_t>(hi));
  const auto neg_inf = hn::Set(df, -INFINITY);
  auto vmax = neg_inf;
  for (int64_t c = 0; c < kTile; c += N) {
    const auto lane = hn::Iota(di, static_cast<int32_t>(c));
    const auto valid = hn::RebindMask(df, hn::And(hn::Gt(lane, vlo), hn::Lt(lane, vhi)));
    auto x = hn::Mul(hn::LoadU(df, s + c), hn::Set(df, scale));
    if (softcap > 0.0f) x = hn::Mul(hn::Set(df, softcap), hn::Tanh(df, hn::Div(x, hn::Set(df, softcap))));
    x = hn::IfThenElse(valid, x, neg_inf);
    hn::StoreU(x, df, s + c);
    vmax = hn::Max(vmax, x);
  }
  const float tile_max = hn::GetLane(hn::MaxOfLanes(df, vmax));
  float factor = 1.0f;
  if (tile_max > *running_max) {
    factor = std::exp(*running_max - tile_max);  // 0 on the first tile (exp(-inf))
    *running_max = tile_max;
  }
  const auto vm = hn::Set(df, *running_max);
  auto vsum = hn::Zero(df);
  for (int64_t c = 0; c < kTile; c += N) {
    const auto lane = hn::Iota(di, static_cast<int32_t>(c));
    const auto valid = hn::RebindMask(df, hn::And(hn::Gt(lane, vlo), hn::Lt(lane, vhi)));
    const auto e = hn::IfThenElseZero(valid, hn::Exp(df, hn::Sub(hn::LoadU(df, s + c), vm)));
    hn::StoreU(e, df, s + c);
    vsum = hn::Add(vsum, e);
  }
  *running_sum = *running_sum * factor + hn::GetLane(hn::SumOfLanes(df, vsum));
  return factor;
}

// Four vectors of the head dim at a time, so four independent chains hide the FMA latency.
void AccumulateTile(const float* v, int64_t dim, const float* p, int64_t lo, int64_t hi, float factor, float* acc) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto f = hn::Set(df, factor);
  int64_t d = 0;
  for (; d + 4 * N <= dim; d += 4 * N) {
    auto a0 = hn::Mul(hn::LoadU(df, acc + d), f), a1 = hn::Mul(hn::LoadU(df, acc + d + N), f);
    auto a2 = hn::Mul(hn::LoadU(df, acc + d + 2 * N), f), a3 = hn::Mul(hn::LoadU(df, acc + d + 3 * N), f);
    for (int64_t j = lo; j < hi; ++j) {
      const float* row = v + j * dim + d;
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
    for (int64_t j = lo; j < hi; ++j) a = hn::MulAdd(hn::Set(df, p[j]), hn::LoadU(df, v + j * dim + d), a);
    hn::StoreU(a, df, acc + d);
  }
  for (; d < dim; ++d) {
    float a = acc[d] * factor;
    for (int64_t j = lo; j < hi; ++j) a = std::fma(p[j], v[j * dim + d], a);
    acc[d] = a;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace keel::kv::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace keel::kv::kernels {

HWY_EXPORT(ScoreTile);
HWY_EXPORT(SoftmaxTile);
HWY_EXPORT(AccumulateTile);

void score_tile(const float* kt, int64_t dim, const float* const* q, int64_t n_queries, float* scores) {
  HWY_DYNAMIC_DISPATCH(ScoreTile)(kt, dim, q, n_queries, scores);
}

float softmax_tile(float* s, int64_t lo, int64_t hi, float scale, float softcap, float* running_max,
                   float* running_sum) {
  return HWY_DYNAMIC_DISPATCH(SoftmaxTile)(s, lo, hi, scale, softcap, running_max, running_sum);
}

void accumulate_tile(const float* v, int64_t dim, const float* p, int64_t lo, int64_t hi, float factor, float* acc) {
  HWY_DYNAMIC_DISPATCH(AccumulateTile)(v, dim, p, lo, hi, factor, acc);
}

}  // namespace keel::kv::kernels
#endif
