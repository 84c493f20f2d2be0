#include "keel/ops/bf16_dot_x86.h"

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12's _mm512_reduce_add_ps trips a false -Wuninitialized inside its own header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

namespace keel::ops {
namespace {

#define KEEL_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

template <int NR, int NT>
KEEL_AVX512BF16 void tile(const uint16_t* const* w, const uint16_t* const* x, int64_t cols, float* y,
                          int64_t y_stride) {
  __m512 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  for (int64_t k = 0; k < cols; k += 32) {
    const int64_t left = cols - k;
    const __mmask32 m = left >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << left) - 1u);
    __m512i xv[NT];
    for (int t = 0; t < NT; ++t) xv[t] = _mm512_maskz_loadu_epi16(m, x[t] + k);
    for (int r = 0; r < NR; ++r) {
      const __m512i wv = _mm512_maskz_loadu_epi16(m, w[r] + k);
      for (int t = 0; t < NT; ++t)
        acc[r][t] = _mm512_dpbf16_ps(acc[r][t], reinterpret_cast<__m512bh>(wv), reinterpret_cast<__m512bh>(xv[t]));
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) y[t * y_stride + r] = _mm512_reduce_add_ps(acc[r][t]);
}

template <int NR>
KEEL_AVX512BF16 void rows_block(const uint16_t* w, int64_t cols, int64_t r, const uint16_t* x, int64_t n_tokens,
                                float* y, int64_t y_stride) {
  const uint16_t* wr[NR];
  for (int i = 0; i < NR; ++i) wr[i] = w + (r + i) * cols;
  int64_t t = 0;
  for (; t + 4 <= n_tokens; t += 4) {
    const uint16_t* xt[4] = {x + t * cols, x + (t + 1) * cols, x + (t + 2) * cols, x + (t + 3) * cols};
    tile<NR, 4>(wr, xt, cols, y + t * y_stride + r, y_stride);
  }
  for (; t < n_tokens; ++t) {
    const uint16_t* xt[1] = {x + t * cols};
    tile<NR, 1>(wr, xt, cols, y + t * y_stride + r, y_stride);
  }
}

}  // namespace

bool cpu_has_avx512_bf16() {
  static const bool has = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw");
  return has;
}

void gemm_bf16_dp(const uint16_t* w, int64_t cols, int64_t r0, int64_t r1, const uint16_t* x, int64_t n_tokens,
                  float* y, int64_t y_stride) {
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) rows_block<4>(w, cols, r, x, n_tokens, y, y_stride);
  for (; r < r1; ++r) rows_block<1>(w, cols, r, x, n_tokens, y, y_stride);
}

}  // namespace keel::ops

#pragma GCC diagnostic pop

#else  // not x86-64: never selected

namespace keel::ops {
bool cpu_has_avx512_bf16() { return false; }
void gemm_bf16_dp(const uint16_t*, int64_t, int64_t, int64_t, const uint16_t*, int64_t, float*, int64_t) {}
}  // namespace keel::ops

#endif
