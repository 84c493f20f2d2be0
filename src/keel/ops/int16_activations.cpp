// The activations of ops/int16_dot.h: each token's blocks of 32 quantized to int16, the same
// values on every target. Highway re-includes this file once per SIMD target; the HWY_ONCE part
// dispatches at run time.
//
// A decode step quantizes a token's activations before each matrix, on the calling thread while
// the other threads wait, so this runs in vectors: done element by element it was about a tenth of
// a mixture-of-experts decode step (2048 values before each 768-row expert matrix).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "keel/ops/int16_activations.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <algorithm>
#include <limits>
#include <string>

#include "keel/ops/int16_dot.h"
#include "keel/util/error.h"

HWY_BEFORE_NAMESPACE();
namespace keel::ops {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Per block of 32: amax = max |x|; q = round-to-nearest-even(clamp(x * (limit / amax), +-limit)),
// the products and the rounding IEEE operations on every target, so every target gives the same
// q, scale and sums.
void QuantizeI16(const float* x, int64_t t0, int64_t t1, I16Activations& a) {
  const hn::CappedTag<float, 32> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int16_t, decltype(df)> d16;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df)), blocks = a.cols / 32;
  const auto limit = static_cast<float>(a.limit);
  for (int64_t t = t0; t < t1; ++t)
    for (int64_t b = 0; b < blocks; ++b) {
      const float* xb = x + t * a.cols + 32 * b;
      int16_t* q = a.q.data() + t * a.cols + 32 * b;
      auto amax = hn::Zero(df);
      bool all_finite = true;
      for (int64_t j = 0; j < 32; j += N) {
        const auto v = hn::LoadU(df, xb + j);
        amax = hn::Max(amax, hn::Abs(v));
        all_finite = all_finite && hn::AllTrue(df, hn::IsFinite(v));
      }
      const size_t at = static_cast<size_t>(t * blocks + b);
      const float m = hn::GetLane(hn::MaxOfLanes(df, amax));
      if (!all_finite || m == 0.0f) {
        // Zeros; or a NaN or infinity, which the f32 products would carry into every output of
        // the token: a NaN scale does the same here.
        std::fill(q, q + 32, int16_t{0});
        a.scale[at] = a.sum[at] = all_finite ? 0.0f : std::numeric_limits<float>::quiet_NaN();
        a.qsum[at] = 0;
        continue;
      }
      const auto inv = hn::Set(df, limit / m), hi = hn::Set(df, limit), lo = hn::Set(df, -limit);
      // Rounding to nearest even by adding and taking off 1.5 * 2^23, which leaves no fraction bits
      // (|v| <= 2^22): exact IEEE additions on every target, where Highway's scalar NearestInt
      // rounds v + 0.5 first and can round 0.49999997 up.
      const auto shift = hn::Set(df, 12582912.0f);
      alignas(64) int16_t in_order[32];
      int16_t* out = a.pairs_split ? in_order : q;
      auto total = hn::Zero(di);
      for (int64_t j = 0; j < 32; j += N) {
        const auto clamped = hn::Min(hn::Max(hn::Mul(hn::LoadU(df, xb + j), inv), lo), hi);
        const auto v = hn::ConvertTo(di, hn::Sub(hn::Add(clamped, shift), shift));
        hn::StoreU(hn::DemoteTo(d16, v), d16, out + j);
        total = hn::Add(total, v);
      }
      if (a.pairs_split)  // evens first: element j goes to j / 2 + 16 (j % 2)
        for (int j = 0; j < 32; ++j) q[j / 2 + 16 * (j % 2)] = in_order[j];
      const int32_t sum = hn::GetLane(hn::SumOfLanes(di, total));
      a.scale[at] = m / limit;
      a.sum[at] = a.scale[at] * static_cast<float>(sum);
      a.qsum[at] = sum;
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace keel::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace keel::ops {

HWY_EXPORT(QuantizeI16);

void size_i16_activations(int64_t cols, int64_t n_tokens, bool pairs_split, I16Activations& a, int16_t limit) {
  if (cols % 32 != 0) throw InternalError("int16 activations need whole blocks of 32, not " + std::to_string(cols));
  a.cols = cols;
  a.pairs_split = pairs_split;
  a.limit = limit;
  a.q.resize(static_cast<size_t>(n_tokens * cols));
  a.scale.resize(static_cast<size_t>(n_tokens * cols / 32));
  a.sum.resize(a.scale.size());
  a.qsum.resize(a.scale.size());
}

void quantize_i16_activations(const float* x, int64_t t0, int64_t t1, I16Activations& a) {
  HWY_DYNAMIC_DISPATCH(QuantizeI16)(x, t0, t1, a);
}

}  // namespace keel::ops
#endif  // HWY_ONCE
