// The activations of ops/int16_dot.h: each token's blocks of 32 quantized to int16. Scalar code,
// the same on every target.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "keel/ops/int16_dot.h"
#include "keel/util/error.h"

namespace keel::ops {
namespace {

// std::nearbyint in the default rounding mode (to nearest, ties to even) for |v| <= 2^22: adding
// 1.5 * 2^23 leaves no fraction bits, so the sum rounds v, and subtracting it back is exact. Inline
// arithmetic, where nearbyint is a libm call per element on the baseline x86-64 build (no SSE4.1).
inline float round_to_even(float v) {
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23
  return (v + kShift) - kShift;
}

}  // namespace

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
  const int64_t blocks = a.cols / 32;
  for (int64_t t = t0; t < t1; ++t)
    for (int64_t b = 0; b < blocks; ++b) {
      const float* xb = x + t * a.cols + 32 * b;
      int16_t* q = a.q.data() + t * a.cols + 32 * b;
      float amax = 0.0f;
      bool finite = true;
      for (int j = 0; j < 32; ++j) {
        amax = std::max(amax, std::abs(xb[j]));
        finite = finite && std::isfinite(xb[j]);
      }
      const size_t at = static_cast<size_t>(t * blocks + b);
      if (!finite || amax == 0.0f) {
        // Zeros; or a NaN or infinity, which the f32 products would carry into every output of
        // the token: a NaN scale does the same here.
        std::fill(q, q + 32, int16_t{0});
        a.scale[at] = a.sum[at] = finite ? 0.0f : std::numeric_limits<float>::quiet_NaN();
        a.qsum[at] = 0;
        continue;
      }
      const auto limit = static_cast<float>(a.limit);
      const float inv = limit / amax;
      int32_t total = 0;
      for (int j = 0; j < 32; ++j) {
        const auto v = static_cast<int32_t>(round_to_even(std::clamp(xb[j] * inv, -limit, limit)));
        q[a.pairs_split ? j / 2 + 16 * (j % 2) : j] = static_cast<int16_t>(v);
        total += v;
      }
      a.scale[at] = amax / limit;
      a.sum[at] = a.scale[at] * static_cast<float>(total);
      a.qsum[at] = total;
    }
}

}  // namespace keel::ops
