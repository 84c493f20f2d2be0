// The per-row loops of attend_spans, compiled by Highway once per SIMD target and chosen at run
// time (see keel/ops/simd_kernels.cpp). Quantized keys are dotted with the int16 query in integer
// arithmetic (pmaddwd: 16-bit products summed in pairs into 32-bit lanes, exact), one group of 32
// at a time, then scaled once per group. Values are widened to float and summed in place.
// Every row's arithmetic is the same whatever rows come before or after it in a run, so results
// do not depend on how rows are grouped into calls.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "keel/kv/kv_attention_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

#include <algorithm>
#include <cmath>

#include "keel/kv/kv_attention_kernels.h"
#include "keel/kv/kv_format_layout.h"
#include "keel/util/half.h"

HWY_BEFORE_NAMESPACE();
namespace keel::kv::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int64_t kGroup = kKvQuantGroup;

HWY_INLINE float load_bf16(const uint8_t* p) { return bf16_to_float(layout::load_u16(p)); }

// ---------------------------------------------------------------------------------------- keys

float ScoreBF16(const float* q, int64_t dim, const uint8_t* k) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du32;
  const hn::Rebind<uint16_t, decltype(df)> du16;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  auto acc = hn::Zero(df);
  int64_t i = 0;
  for (; i + N <= dim; i += N) {
    const auto raw = hn::LoadU(du16, reinterpret_cast<const uint16_t*>(k) + i);
    const auto kv = hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, raw)));
    acc = hn::MulAdd(kv, hn::LoadU(df, q + i), acc);
  }
  float sum = hn::GetLane(hn::SumOfLanes(df, acc));
  for (; i < dim; ++i) sum += q[i] * load_bf16(k + 2 * i);
  return sum;
}

// Integer group dot products: D16 holds int16 lanes (at most one group), D32 their pair sums.
template <class D16>
using WideOf = hn::RepartitionToWide<D16>;

float ScoreInt8(const PreparedQuery& q, int64_t dim, const uint8_t* k) {
  const hn::CappedTag<int16_t, kGroup> d16;
  const WideOf<decltype(d16)> d32;
  const hn::Rebind<float, decltype(d32)> df;
  const hn::Rebind<int8_t, decltype(d16)> d8;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d16));
  const uint8_t* meta = k + layout::meta_offset(KvFormat::Int8, dim);
  auto total = hn::Zero(df);
  for (int64_t g = 0; g < dim / kGroup; ++g) {
    auto sum0 = hn::Zero(d32), sum1 = hn::Zero(d32);
    for (int64_t i = 0; i < kGroup; i += N) {
      const auto kv = hn::PromoteTo(d16, hn::LoadU(d8, reinterpret_cast<const int8_t*>(k) + g * kGroup + i));
      sum0 = hn::ReorderWidenMulAccumulate(d32, kv, hn::LoadU(d16, q.q16 + g * kGroup + i), sum0, sum1);
    }
    const float w = load_bf16(meta + 2 * g) * q.q_scale[g];
    total = hn::MulAdd(hn::ConvertTo(df, hn::Add(sum0, sum1)), hn::Set(df, w), total);
  }
  return hn::GetLane(hn::SumOfLanes(df, total));
}

// Affine keys: q . (m + s c) = s * (q . c) + m * sum(q), per group.
float ScoreInt4(const PreparedQuery& q, int64_t dim, const uint8_t* k) {
  const hn::CappedTag<int16_t, 16> d16;  // one lane per code byte: 16 bytes hold a group
  const WideOf<decltype(d16)> d32;
  const hn::Rebind<float, decltype(d32)> df;
  const hn::Rebind<uint8_t, decltype(d16)> du8;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d16));
  const uint8_t* meta = k + layout::meta_offset(KvFormat::Int4, dim);
  const auto low4 = hn::Set(d16, 0xF);
  auto total = hn::Zero(df);
  float offset = 0;
  for (int64_t g = 0; g < dim / kGroup; ++g) {
    const uint8_t* codes = k + g * 16;
    const int16_t* qg = q.q16 + g * kGroup;
    auto sum0 = hn::Zero(d32), sum1 = hn::Zero(d32);
    for (int64_t j = 0; j < 16; j += N) {
      const auto b = hn::PromoteTo(d16, hn::LoadU(du8, codes + j));
      sum0 = hn::ReorderWidenMulAccumulate(d32, hn::And(b, low4), hn::LoadU(d16, qg + j), sum0, sum1);
      sum0 = hn::ReorderWidenMulAccumulate(d32, hn::ShiftRight<4>(b), hn::LoadU(d16, qg + 16 + j), sum0, sum1);
    }
    const float w = load_bf16(meta + 4 * g) * q.q_scale[g];
    total = hn::MulAdd(hn::ConvertTo(df, hn::Add(sum0, sum1)), hn::Set(df, w), total);
    offset += load_bf16(meta + 4 * g + 2) * q.q_sum[g];
  }
  return hn::GetLane(hn::SumOfLanes(df, total)) + offset;
}

float ScoreInt2(const PreparedQuery& q, int64_t dim, const uint8_t* k) {
  const hn::CappedTag<int16_t, 8> d16;  // 8 bytes hold a group, four codes each
  const WideOf<decltype(d16)> d32;
  const hn::Rebind<float, decltype(d32)> df;
  const hn::Rebind<uint8_t, decltype(d16)> du8;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d16));
  const uint8_t* meta = k + layout::meta_offset(KvFormat::Int2, dim);
  const auto low2 = hn::Set(d16, 0x3);
  auto total = hn::Zero(df);
  float offset = 0;
  for (int64_t g = 0; g < dim / kGroup; ++g) {
    const uint8_t* codes = k + g * 8;
    const int16_t* qg = q.q16 + g * kGroup;
    auto sum0 = hn::Zero(d32), sum1 = hn::Zero(d32);
    for (int64_t j = 0; j < 8; j += N) {
      const auto b = hn::PromoteTo(d16, hn::LoadU(du8, codes + j));
      sum0 = hn::ReorderWidenMulAccumulate(d32, hn::And(b, low2), hn::LoadU(d16, qg + j), sum0, sum1);
      sum0 = hn::ReorderWidenMulAccumulate(d32, hn::And(hn::ShiftRight<2>(b), low2), hn::LoadU(d16, qg + 8 + j), sum0, sum1);
      sum0 = hn::ReorderWidenMulAccumulate(d32, hn::And(hn::ShiftRight<4>(b), low2), hn::LoadU(d16, qg + 16 + j), sum0, sum1);
      sum0 = hn::ReorderWidenMulAccumulate(d32, hn::ShiftRight<6>(b), hn::LoadU(d16, qg + 24 + j), sum0, sum1);
    }
    const float w = load_bf16(meta + 4 * g) * q.q_scale[g];
    total = hn::MulAdd(hn::ConvertTo(df, hn::Add(sum0, sum1)), hn::Set(df, w), total);
    offset += load_bf16(meta + 4 * g + 2) * q.q_sum[g];
  }
  return hn::GetLane(hn::SumOfLanes(df, total)) + offset;
}

void ScoreRows(KvFormat f, const PreparedQuery& q, int64_t dim, const uint8_t* k, size_t stride, int64_t n,
               float* scores) {
  for (int64_t r = 0; r < n; ++r, k += stride) {
    switch (f) {
      case KvFormat::BF16: scores[r] = ScoreBF16(q.q, dim, k); break;
      case KvFormat::Int8: scores[r] = ScoreInt8(q, dim, k); break;
      case KvFormat::Int4: scores[r] = ScoreInt4(q, dim, k); break;
      case KvFormat::Int2: scores[r] = ScoreInt2(q, dim, k); break;
    }
  }
}

// -------------------------------------------------------------------------------------- values
// Each slice of acc is loaded once per run and updated row by row in order, so every element sees
// the same sequence of operations however long the run is.

void AccumulateBF16(const float* p, int64_t dim, const uint8_t* v, size_t stride, int64_t n, float* acc) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du32;
  const hn::Rebind<uint16_t, decltype(df)> du16;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t d = 0;
  for (; d + N <= dim; d += N) {
    auto a = hn::LoadU(df, acc + d);
    for (int64_t r = 0; r < n; ++r) {
      const auto raw = hn::LoadU(du16, reinterpret_cast<const uint16_t*>(v + r * stride) + d);
      a = hn::MulAdd(hn::Set(df, p[r]), hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, raw))), a);
    }
    hn::StoreU(a, df, acc + d);
  }
  for (; d < dim; ++d)
    for (int64_t r = 0; r < n; ++r) acc[d] += p[r] * load_bf16(v + r * stride + 2 * d);
}

// Rows are taken kRowBatch at a time so that each row's group weights are computed once, not once
// per vector slice of the group.
constexpr int64_t kRowBatch = 16;

void AccumulateInt8(const float* p, int64_t dim, const uint8_t* v, size_t stride, int64_t n, float* acc) {
  const hn::CappedTag<float, kGroup> df;
  const hn::Rebind<int32_t, decltype(df)> di32;
  const hn::Rebind<int8_t, decltype(df)> di8;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int64_t meta = layout::meta_offset(KvFormat::Int8, dim);
  float w[kRowBatch];
  for (int64_t r0 = 0; r0 < n; r0 += kRowBatch) {
    const int64_t rows = std::min(kRowBatch, n - r0);
    const uint8_t* batch = v + r0 * stride;
    for (int64_t g = 0; g < dim / kGroup; ++g) {
      for (int64_t r = 0; r < rows; ++r) w[r] = p[r0 + r] * load_bf16(batch + r * stride + meta + 2 * g);
      for (int64_t i = 0; i < kGroup; i += N) {
        auto a = hn::LoadU(df, acc + g * kGroup + i);
        for (int64_t r = 0; r < rows; ++r) {
          const auto* codes = reinterpret_cast<const int8_t*>(batch + r * stride) + g * kGroup + i;
          a = hn::MulAdd(hn::ConvertTo(df, hn::PromoteTo(di32, hn::LoadU(di8, codes))), hn::Set(df, w[r]), a);
        }
        hn::StoreU(a, df, acc + g * kGroup + i);
      }
    }
  }
}

// acc += p * (m + s c) = (p s) c + p m.
void AccumulateInt4(const float* p, int64_t dim, const uint8_t* v, size_t stride, int64_t n, float* acc) {
  const hn::CappedTag<float, 16> df;
  const hn::Rebind<int32_t, decltype(df)> di32;
  const hn::Rebind<uint8_t, decltype(df)> du8;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int64_t meta = layout::meta_offset(KvFormat::Int4, dim);
  const auto low4 = hn::Set(di32, 0xF);
  float ws[kRowBatch], wm[kRowBatch];
  for (int64_t r0 = 0; r0 < n; r0 += kRowBatch) {
    const int64_t rows = std::min(kRowBatch, n - r0);
    const uint8_t* batch = v + r0 * stride;
    for (int64_t g = 0; g < dim / kGroup; ++g) {
      for (int64_t r = 0; r < rows; ++r) {
        ws[r] = p[r0 + r] * load_bf16(batch + r * stride + meta + 4 * g);
        wm[r] = p[r0 + r] * load_bf16(batch + r * stride + meta + 4 * g + 2);
      }
      for (int64_t j = 0; j < 16; j += N) {
        float* lo_acc = acc + g * kGroup + j;
        float* hi_acc = lo_acc + 16;
        auto lo = hn::LoadU(df, lo_acc), hi = hn::LoadU(df, hi_acc);
        for (int64_t r = 0; r < rows; ++r) {
          const auto b = hn::PromoteTo(di32, hn::LoadU(du8, batch + r * stride + g * 16 + j));
          const auto s = hn::Set(df, ws[r]), m = hn::Set(df, wm[r]);
          lo = hn::Add(lo, hn::MulAdd(hn::ConvertTo(df, hn::And(b, low4)), s, m));
          hi = hn::Add(hi, hn::MulAdd(hn::ConvertTo(df, hn::ShiftRight<4>(b)), s, m));
        }
        hn::StoreU(lo, df, lo_acc);
        hn::StoreU(hi, df, hi_acc);
      }
    }
  }
}

void AccumulateInt2(const float* p, int64_t dim, const uint8_t* v, size_t stride, int64_t n, float* acc) {
  const hn::CappedTag<float, 8> df;
  const hn::Rebind<int32_t, decltype(df)> di32;
  const hn::Rebind<uint8_t, decltype(df)> du8;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int64_t meta = layout::meta_offset(KvFormat::Int2, dim);
  const auto low2 = hn::Set(di32, 0x3);
  float ws[kRowBatch], wm[kRowBatch];
  for (int64_t r0 = 0; r0 < n; r0 += kRowBatch) {
    const int64_t rows = std::min(kRowBatch, n - r0);
    const uint8_t* batch = v + r0 * stride;
    for (int64_t g = 0; g < dim / kGroup; ++g) {
      for (int64_t r = 0; r < rows; ++r) {
        ws[r] = p[r0 + r] * load_bf16(batch + r * stride + meta + 4 * g);
        wm[r] = p[r0 + r] * load_bf16(batch + r * stride + meta + 4 * g + 2);
      }
      for (int64_t j = 0; j < 8; j += N) {
        float* base = acc + g * kGroup + j;
        auto a0 = hn::LoadU(df, base), a1 = hn::LoadU(df, base + 8), a2 = hn::LoadU(df, base + 16),
             a3 = hn::LoadU(df, base + 24);
        for (int64_t r = 0; r < rows; ++r) {
          const auto b = hn::PromoteTo(di32, hn::LoadU(du8, batch + r * stride + g * 8 + j));
          const auto s = hn::Set(df, ws[r]), m = hn::Set(df, wm[r]);
          a0 = hn::Add(a0, hn::MulAdd(hn::ConvertTo(df, hn::And(b, low2)), s, m));
          a1 = hn::Add(a1, hn::MulAdd(hn::ConvertTo(df, hn::And(hn::ShiftRight<2>(b), low2)), s, m));
          a2 = hn::Add(a2, hn::MulAdd(hn::ConvertTo(df, hn::And(hn::ShiftRight<4>(b), low2)), s, m));
          a3 = hn::Add(a3, hn::MulAdd(hn::ConvertTo(df, hn::ShiftRight<6>(b)), s, m));
        }
        hn::StoreU(a0, df, base);
        hn::StoreU(a1, df, base + 8);
        hn::StoreU(a2, df, base + 16);
        hn::StoreU(a3, df, base + 24);
      }
    }
  }
}

void AccumulateRows(KvFormat f, const float* p, int64_t dim, const uint8_t* v, size_t stride, int64_t n, float* acc) {
  switch (f) {
    case KvFormat::BF16: return AccumulateBF16(p, dim, v, stride, n, acc);
    case KvFormat::Int8: return AccumulateInt8(p, dim, v, stride, n, acc);
    case KvFormat::Int4: return AccumulateInt4(p, dim, v, stride, n, acc);
    case KvFormat::Int2: return AccumulateInt2(p, dim, v, stride, n, acc);
  }
}

// ------------------------------------------------------------------------------------- softmax

void ExpShifted(float* s, int64_t n, float max) {
  const hn::CappedTag<float, kExpTile> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  HWY_ALIGN float tile[kExpTile] = {};  // padded to whole vectors; lanes past n are ignored
  std::copy(s, s + n, tile);
  const auto vmax = hn::Set(df, max);
  for (int64_t i = 0; i < n; i += N) hn::Store(hn::Exp(df, hn::Sub(hn::Load(df, tile + i), vmax)), df, tile + i);
  std::copy(tile, tile + n, s);
}

}  // namespace HWY_NAMESPACE
}  // namespace keel::kv::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace keel::kv::kernels {

HWY_EXPORT(ScoreRows);
HWY_EXPORT(AccumulateRows);
HWY_EXPORT(ExpShifted);

void prepare_query(const float* q, int64_t dim, int16_t* q16, float* q_scale, float* q_sum) {
  for (int64_t g = 0; g < dim / kKvQuantGroup; ++g) {
    const float* qg = q + g * kKvQuantGroup;
    float amax = 0;
    for (int64_t i = 0; i < kKvQuantGroup; ++i) amax = std::max(amax, std::fabs(qg[i]));
    const float s = amax / 32767.0f;
    int32_t sum = 0;
    for (int64_t i = 0; i < kKvQuantGroup; ++i) {
      const int16_t c = s > 0 ? static_cast<int16_t>(std::clamp(std::nearbyint(qg[i] / s), -32767.0f, 32767.0f)) : 0;
      q16[g * kKvQuantGroup + i] = c;
      sum += c;
    }
    q_scale[g] = s;
    q_sum[g] = s * static_cast<float>(sum);  // of the rounded q, like the dot products that use it
  }
}

void score_rows(KvFormat f, const PreparedQuery& q, int64_t dim, const uint8_t* k, size_t stride, int64_t n,
                float* scores) {
  HWY_DYNAMIC_DISPATCH(ScoreRows)(f, q, dim, k, stride, n, scores);
}

void accumulate_rows(KvFormat f, const float* p, int64_t dim, const uint8_t* v, size_t stride, int64_t n, float* acc) {
  HWY_DYNAMIC_DISPATCH(AccumulateRows)(f, p, dim, v, stride, n, acc);
}

void exp_shifted(float* s, int64_t n, float max) { HWY_DYNAMIC_DISPATCH(ExpShifted)(s, n, max); }

}  // namespace keel::kv::kernels
#endif
