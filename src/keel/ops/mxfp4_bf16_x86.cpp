#include "keel/ops/mxfp4_bf16_x86.h"

#include <cmath>
#include <vector>

#include "keel/ops/bf16_dot_x86.h"
#include "keel/ops/simd_target.h"
#include "keel/util/half.h"

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12's _mm512_reduce_add_ps trips a false -Wuninitialized inside its own header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

namespace keel::ops {
namespace {

#define KEEL_MXFP4_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx512vbmi")))

// Twice the e2m1 values (the scalar fallback below scales them by 2^(e - 128)).
constexpr int8_t kTwiceE2m1[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

KEEL_MXFP4_TARGET inline __m512 dp(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
}

// Block b (0..3) of the 64 code bytes in `bytes` (4 blocks of 32 elements), widened to 32 bf16
// values in element order: each 16-bit lane gets its code byte (VPERMB), odd lanes shift the high
// nibble down, a 32-entry table (VPERMW ignores index bits above 4) gives the bf16 e2m1 value and
// adding e - 127 to the exponent field of the non-zero ones scales the block. Exact while the
// result is a normal bf16 (exponents 2..252); other exponents take the scalar path.
KEEL_MXFP4_TARGET inline __m512i widen_block(__m512i bytes, int b, uint8_t e, const uint8_t* codes) {
  if (e < 2 || e > 252) {
    alignas(64) uint16_t v[32];
    for (int i = 0; i < 32; ++i) {
      const uint8_t byte = codes[b * 16 + i / 2];
      const int code = i % 2 ? byte >> 4 : byte & 0x0F;
      v[i] = float_to_bf16(static_cast<float>(kTwiceE2m1[code]) * std::ldexp(1.0f, e - 128));
    }
    return _mm512_load_si512(v);
  }
  // Lane j's low byte from byte j/2 of the block; the high byte stays zero.
  const __m512i base = _mm512_set_epi8(0, 15, 0, 15, 0, 14, 0, 14, 0, 13, 0, 13, 0, 12, 0, 12, 0, 11, 0, 11, 0, 10, 0,
                                       10, 0, 9, 0, 9, 0, 8, 0, 8, 0, 7, 0, 7, 0, 6, 0, 6, 0, 5, 0, 5, 0, 4, 0, 4, 0, 3,
                                       0, 3, 0, 2, 0, 2, 0, 1, 0, 1, 0, 0, 0, 0);
  const __m512i idx = _mm512_add_epi8(base, _mm512_set1_epi8(static_cast<char>(16 * b)));
  const __m512i table = _mm512_set_epi16(
      static_cast<short>(0xC0C0), static_cast<short>(0xC080), static_cast<short>(0xC040), static_cast<short>(0xC000),
      static_cast<short>(0xBFC0), static_cast<short>(0xBF80), static_cast<short>(0xBF00), static_cast<short>(0x8000),
      0x40C0, 0x4080, 0x4040, 0x4000, 0x3FC0, 0x3F80, 0x3F00, 0x0000, static_cast<short>(0xC0C0),
      static_cast<short>(0xC080), static_cast<short>(0xC040), static_cast<short>(0xC000), static_cast<short>(0xBFC0),
      static_cast<short>(0xBF80), static_cast<short>(0xBF00), static_cast<short>(0x8000), 0x40C0, 0x4080, 0x4040,
      0x4000, 0x3FC0, 0x3F80, 0x3F00, 0x0000);
  const __m512i shifts = _mm512_set1_epi32(4 << 16);  // 0 for even lanes, 4 for odd
  const __m512i code = _mm512_srlv_epi16(_mm512_maskz_permutexvar_epi8(0x5555555555555555ULL, idx, bytes), shifts);
  const __m512i v = _mm512_permutexvar_epi16(code, table);
  const __mmask32 nonzero = _mm512_test_epi16_mask(v, _mm512_set1_epi16(0x7FFF));
  return _mm512_mask_add_epi16(v, nonzero, v, _mm512_set1_epi16(static_cast<short>((e - 127) * 128)));
}

// The 64 code bytes of blocks [b, b + 4) of a row, or fewer at the row's end (zeros after).
KEEL_MXFP4_TARGET inline __m512i load_blocks(const uint8_t* codes, int64_t b, int64_t blocks) {
  const int64_t left = (blocks - b) * 16;
  const __mmask64 k = left >= 64 ? ~__mmask64{0} : (__mmask64{1} << left) - 1;
  return _mm512_maskz_loadu_epi8(k, codes + b * 16);
}

// One token, four rows at a time: per (row, token) the chain gemm_bf16_dp's tiles run (one
// VDPBF16PS per 32 elements in element order, then one reduction), on rows widened in registers.
KEEL_MXFP4_TARGET void rows_one_token(const Mxfp4Rows& m, const uint16_t* x, int64_t r0, int64_t r1, float* y) {
  const int64_t blocks = m.cols / 32;
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    const uint8_t* c[4];
    const uint8_t* e[4];
    for (int i = 0; i < 4; ++i) {
      c[i] = m.codes + (r + i) * (m.cols / 2);
      e[i] = m.exponents + (r + i) * blocks;
    }
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t b4 = 0; b4 < blocks; b4 += 4) {
      const __m512i q0 = load_blocks(c[0], b4, blocks), q1 = load_blocks(c[1], b4, blocks);
      const __m512i q2 = load_blocks(c[2], b4, blocks), q3 = load_blocks(c[3], b4, blocks);
      for (int b = 0; b < 4 && b4 + b < blocks; ++b) {
        const int64_t k = (b4 + b) * 32;
        const __m512i v = _mm512_loadu_si512(x + k);
        a0 = dp(a0, widen_block(q0, b, e[0][b4 + b], c[0] + b4 * 16), v);
        a1 = dp(a1, widen_block(q1, b, e[1][b4 + b], c[1] + b4 * 16), v);
        a2 = dp(a2, widen_block(q2, b, e[2][b4 + b], c[2] + b4 * 16), v);
        a3 = dp(a3, widen_block(q3, b, e[3][b4 + b], c[3] + b4 * 16), v);
      }
    }
    y[r - r0] = _mm512_reduce_add_ps(a0);
    y[r + 1 - r0] = _mm512_reduce_add_ps(a1);
    y[r + 2 - r0] = _mm512_reduce_add_ps(a2);
    y[r + 3 - r0] = _mm512_reduce_add_ps(a3);
  }
  for (; r < r1; ++r) {
    const uint8_t* c = m.codes + r * (m.cols / 2);
    const uint8_t* e = m.exponents + r * blocks;
    __m512 a = _mm512_setzero_ps();
    for (int64_t b4 = 0; b4 < blocks; b4 += 4) {
      const __m512i q = load_blocks(c, b4, blocks);
      for (int b = 0; b < 4 && b4 + b < blocks; ++b)
        a = dp(a, widen_block(q, b, e[b4 + b], c + b4 * 16), _mm512_loadu_si512(x + (b4 + b) * 32));
    }
    y[r - r0] = _mm512_reduce_add_ps(a);
  }
}

// Rows [r0, r1) widened to bf16, row-major, into `out`.
KEEL_MXFP4_TARGET void widen_rows(const Mxfp4Rows& m, int64_t r0, int64_t r1, uint16_t* out) {
  const int64_t blocks = m.cols / 32;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* c = m.codes + r * (m.cols / 2);
    const uint8_t* e = m.exponents + r * blocks;
    uint16_t* o = out + (r - r0) * m.cols;
    for (int64_t b4 = 0; b4 < blocks; b4 += 4) {
      const __m512i q = load_blocks(c, b4, blocks);
      for (int b = 0; b < 4 && b4 + b < blocks; ++b)
        _mm512_storeu_si512(o + (b4 + b) * 32, widen_block(q, b, e[b4 + b], c + b4 * 16));
    }
  }
}

}  // namespace

bool mxfp4_bf16_supported() {
  static const bool cpu = __builtin_cpu_supports("avx512vbmi");
  return cpu && cpu_has_avx512_bf16();
}

void gemm_mxfp4_bf16(const Mxfp4Rows& w, const uint16_t* x, int64_t n_tokens, int64_t r0, int64_t r1, float* y,
                     int64_t y_stride) {
  if (n_tokens == 1) {
    rows_one_token(w, x, r0, r1, y);
    return;
  }
  thread_local std::vector<uint16_t> panel;  // [r1 - r0][cols] bf16
  panel.resize(static_cast<size_t>((r1 - r0) * w.cols));
  widen_rows(w, r0, r1, panel.data());
  gemm_bf16_dp(panel.data(), w.cols, 0, r1 - r0, x, n_tokens, y, y_stride);
}

}  // namespace keel::ops

#pragma GCC diagnostic pop

#else  // not x86-64: never selected

namespace keel::ops {
bool mxfp4_bf16_supported() { return false; }
void gemm_mxfp4_bf16(const Mxfp4Rows&, const uint16_t*, int64_t, int64_t, int64_t, float*, int64_t) {}
}  // namespace keel::ops

#endif
