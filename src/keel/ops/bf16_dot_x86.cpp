#include "keel/ops/bf16_dot_x86.h"

#include "keel/ops/simd_target.h"

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12's _mm512_reduce_add_ps trips a false -Wuninitialized inside its own header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "keel/ops/avx512_reduce.h"

namespace keel::ops {
namespace {

#define KEEL_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

KEEL_AVX512BF16 inline __m512 dp(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
}

KEEL_AVX512BF16 inline __mmask32 tail_mask(int64_t left) {
  return left >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << left) - 1u);
}

// 32 bf16 values, or the first ones of a tail (the rest zero). A masked load in every step cost
// a quarter of the tile's speed, so the hot tiles take one only in their tail step (inlined with a
// constant full mask elsewhere); the values, and so the bits, are the same.
KEEL_AVX512BF16 inline __m512i load(__mmask32 m, const uint16_t* p) {
  return m == ~__mmask32{0} ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi16(m, p);
}

// Generic NR x NT tile for the edges (a single row or a single token).
template <int NR, int NT>
KEEL_AVX512BF16 void tile(const uint16_t* const* w, const uint16_t* const* x, int64_t cols, float* y,
                          int64_t y_stride) {
  __m512 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  for (int64_t k = 0; k < cols; k += 32) {
    const __mmask32 m = tail_mask(cols - k);
    __m512i xv[NT];
    for (int t = 0; t < NT; ++t) xv[t] = load(m, x[t] + k);
    for (int r = 0; r < NR; ++r) {
      const __m512i wv = load(m, w[r] + k);
      for (int t = 0; t < NT; ++t) acc[r][t] = dp(acc[r][t], wv, xv[t]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) y[t * y_stride + r] = _mm512_reduce_add_ps(acc[r][t]);
}

// The hot 4x4 tile with its 16 accumulators in named variables: GCC keeps an array of vectors in
// memory across iterations, which halves the speed. Same per-(row, token) order as the generic tile.
template <>
KEEL_AVX512BF16 void tile<4, 4>(const uint16_t* const* w, const uint16_t* const* x, int64_t cols, float* y,
                                int64_t y_stride) {
  __m512 a00 = _mm512_setzero_ps(), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00, a13 = a00;
  __m512 a20 = a00, a21 = a00, a22 = a00, a23 = a00, a30 = a00, a31 = a00, a32 = a00, a33 = a00;
  const uint16_t *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
  const uint16_t *x0 = x[0], *x1 = x[1], *x2 = x[2], *x3 = x[3];
  auto step = [&](int64_t k, __mmask32 m) KEEL_AVX512BF16 {
    const __m512i v0 = load(m, x0 + k), v1 = load(m, x1 + k);
    const __m512i v2 = load(m, x2 + k), v3 = load(m, x3 + k);
    __m512i wv = load(m, w0 + k);
    a00 = dp(a00, wv, v0), a01 = dp(a01, wv, v1), a02 = dp(a02, wv, v2), a03 = dp(a03, wv, v3);
    wv = load(m, w1 + k);
    a10 = dp(a10, wv, v0), a11 = dp(a11, wv, v1), a12 = dp(a12, wv, v2), a13 = dp(a13, wv, v3);
    wv = load(m, w2 + k);
    a20 = dp(a20, wv, v0), a21 = dp(a21, wv, v1), a22 = dp(a22, wv, v2), a23 = dp(a23, wv, v3);
    wv = load(m, w3 + k);
    a30 = dp(a30, wv, v0), a31 = dp(a31, wv, v1), a32 = dp(a32, wv, v2), a33 = dp(a33, wv, v3);
  };
  int64_t k = 0;
  for (; k + 32 <= cols; k += 32) step(k, ~__mmask32{0});
  if (k < cols) step(k, tail_mask(cols - k));
  const __m512 sums = avx512::reduce16(a00, a01, a02, a03, a10, a11, a12, a13, a20, a21, a22, a23, a30, a31, a32, a33);
  for (int t = 0; t < 4; ++t) _mm_storeu_ps(y + t * y_stride, avx512::quarter(sums, t));
}

// Decode's tile: four rows against one token, accumulators in registers for the same reason.
template <>
KEEL_AVX512BF16 void tile<4, 1>(const uint16_t* const* w, const uint16_t* const* x, int64_t cols, float* y,
                                int64_t /*y_stride*/) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  const uint16_t *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3], *x0 = x[0];
  // Decode streams every row once from memory: ask for the rows eight ahead (the next tile but
  // one) while these are multiplied.
  const int64_t ahead = 8 * cols;
  auto step = [&](int64_t k, __mmask32 m) KEEL_AVX512BF16 {
    _mm_prefetch(reinterpret_cast<const char*>(w0 + ahead + k), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(w1 + ahead + k), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(w2 + ahead + k), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(w3 + ahead + k), _MM_HINT_T0);
    const __m512i v = load(m, x0 + k);
    a0 = dp(a0, load(m, w0 + k), v);
    a1 = dp(a1, load(m, w1 + k), v);
    a2 = dp(a2, load(m, w2 + k), v);
    a3 = dp(a3, load(m, w3 + k), v);
  };
  int64_t k = 0;
  for (; k + 32 <= cols; k += 32) step(k, ~__mmask32{0});
  if (k < cols) step(k, tail_mask(cols - k));
  y[0] = _mm512_reduce_add_ps(a0);
  y[1] = _mm512_reduce_add_ps(a1);
  y[2] = _mm512_reduce_add_ps(a2);
  y[3] = _mm512_reduce_add_ps(a3);
}

// All rows of [r0, r1) against one block of NT tokens. The caller walks token blocks outermost,
// so the block's activations stay in L1 while the task's rows (a few KiB each) are reused from L1
// or L2 for every token block.
template <int NT>
KEEL_AVX512BF16 void token_block(const uint16_t* w, int64_t cols, int64_t r0, int64_t r1, const uint16_t* x,
                                 float* y, int64_t y_stride) {
  const uint16_t* xt[NT];
  for (int t = 0; t < NT; ++t) xt[t] = x + t * cols;
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    const uint16_t* wr[4] = {w + r * cols, w + (r + 1) * cols, w + (r + 2) * cols, w + (r + 3) * cols};
    tile<4, NT>(wr, xt, cols, y + r, y_stride);
  }
  for (; r < r1; ++r) {
    const uint16_t* wr[1] = {w + r * cols};
    tile<1, NT>(wr, xt, cols, y + r, y_stride);
  }
}

}  // namespace

bool cpu_has_avx512_bf16() {
  static const bool has = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw");
  return has && avx512_kernels_allowed();
}

namespace {

// Twelve independent chains, enough to cover the instruction's latency on current cores, each from
// its own start (equal chains are merged into one by the compiler: FmaBurst).
KEEL_AVX512BF16 double dp_burst(int64_t iterations, float* sink) {
  __m512 a0 = _mm512_set1_ps(0), a1 = _mm512_set1_ps(1), a2 = _mm512_set1_ps(2), a3 = _mm512_set1_ps(3),
         a4 = _mm512_set1_ps(4), a5 = _mm512_set1_ps(5), a6 = _mm512_set1_ps(6), a7 = _mm512_set1_ps(7),
         a8 = _mm512_set1_ps(8), a9 = _mm512_set1_ps(9), a10 = _mm512_set1_ps(10), a11 = _mm512_set1_ps(11);
  const __m512i x = _mm512_set1_epi16(0x3f80), y = _mm512_set1_epi16(0x3a83);  // 1.0 and ~0.001
  for (int64_t i = 0; i < iterations; ++i) {
    a0 = dp(a0, x, y), a1 = dp(a1, x, y), a2 = dp(a2, x, y), a3 = dp(a3, x, y), a4 = dp(a4, x, y), a5 = dp(a5, x, y);
    a6 = dp(a6, x, y), a7 = dp(a7, x, y), a8 = dp(a8, x, y), a9 = dp(a9, x, y), a10 = dp(a10, x, y), a11 = dp(a11, x, y);
  }
  const __m512 sum = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                                   _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)),
                                                 _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11))));
  *sink = _mm512_reduce_add_ps(sum);
  return static_cast<double>(iterations) * 12.0 * 64.0;
}

}  // namespace

double bf16_dp_burst(int64_t iterations, float* sink) {
  return cpu_has_avx512_bf16() ? dp_burst(iterations, sink) : 0.0;
}

// Decode: one row after another, so the weights stream from memory in address order, with the
// bytes 4 KiB ahead asked for while these are multiplied. Each row's sum is the one tile<4, 1> and
// the token tiles form (the same accumulator, steps and reduction).
KEEL_AVX512BF16 void rows_one_token(const uint16_t* w, int64_t cols, int64_t r0, int64_t r1, const uint16_t* x,
                                    float* y) {
  constexpr int64_t kAhead = 4096 / 2;  // bf16 values
  for (int64_t r = r0; r < r1; ++r) {
    const uint16_t* row = w + r * cols;
    __m512 a = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 32 <= cols; k += 32) {
      _mm_prefetch(reinterpret_cast<const char*>(row + k + kAhead), _MM_HINT_T0);
      a = dp(a, _mm512_loadu_si512(row + k), _mm512_loadu_si512(x + k));
    }
    if (k < cols) {
      const __mmask32 m = tail_mask(cols - k);
      a = dp(a, _mm512_maskz_loadu_epi16(m, row + k), _mm512_maskz_loadu_epi16(m, x + k));
    }
    y[r - r0] = _mm512_reduce_add_ps(a);
  }
}

void gemm_bf16_dp(const uint16_t* w, int64_t cols, int64_t r0, int64_t r1, const uint16_t* x, int64_t n_tokens,
                  float* y, int64_t y_stride) {
  if (n_tokens == 1) return rows_one_token(w, cols, r0, r1, x, y + r0);
  int64_t t = 0;
  for (; t + 4 <= n_tokens; t += 4) token_block<4>(w, cols, r0, r1, x + t * cols, y + t * y_stride, y_stride);
  for (; t < n_tokens; ++t) token_block<1>(w, cols, r0, r1, x + t * cols, y + t * y_stride, y_stride);
}

}  // namespace keel::ops

#pragma GCC diagnostic pop

#else  // not x86-64: never selected

namespace keel::ops {
bool cpu_has_avx512_bf16() { return false; }
void gemm_bf16_dp(const uint16_t*, int64_t, int64_t, int64_t, const uint16_t*, int64_t, float*, int64_t) {}
double bf16_dp_burst(int64_t, float*) { return 0.0; }
}  // namespace keel::ops

#endif
