#pragma once
// Sixteen horizontal sums at once, bit for bit what sixteen _mm512_reduce_add_ps give: for 4x4
// register tiles (bf16_dot_x86.cpp) whose per-output sums must equal those of their one-row and
// one-token tiles. x86-64 with GCC or Clang only; include after
// <immintrin.h>. Pure functions: any thread.

namespace keel::ops::avx512 {

#define KEEL_AVX512F __attribute__((target("avx512f")))

// Lane pairs of _mm512_reduce_add_ps, in GCC's order: lane i + lane i+8, then i + i+4, then i + i+2,
// then the two left. Float addition is commutative, so pairing the same lanes gives its bits exactly.
// a (x) and b (y) -> [x level 1 | y level 1]: each 256-bit half the 8 sums of one vector.
KEEL_AVX512F inline __m512 pair_halves(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
}
// Two level-1 vectors (two sums each) -> four 128-bit quarters, one per sum, 4 lanes each.
KEEL_AVX512F inline __m512 pair_quarters(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xDD));
}
// Within each quarter: [a0 + a2, a1 + a3, b0 + b2, b1 + b3].
KEEL_AVX512F inline __m512 pair_lanes2(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x44), _mm512_shuffle_ps(a, b, 0xEE));
}
// Within each quarter: [a0 + a1, a2 + a3, b0 + b1, b2 + b3].
KEEL_AVX512F inline __m512 pair_lanes1(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xDD));
}

// The sums of sixteen vectors v[r][t] (row r, token t), each bit for bit _mm512_reduce_add_ps(v),
// in one vector: quarter t holds rows 0..3 of token t. 45 instructions instead of 16 reductions.
KEEL_AVX512F inline __m512 reduce16(__m512 v00, __m512 v01, __m512 v02, __m512 v03, __m512 v10, __m512 v11,
                                    __m512 v12, __m512 v13, __m512 v20, __m512 v21, __m512 v22, __m512 v23,
                                    __m512 v30, __m512 v31, __m512 v32, __m512 v33) {
  // Vector j = 4r + t. Level 1 pairs j = 2i, 2i + 1; level 2 makes quarters of j = 4i .. 4i + 3.
  const __m512 q0 = pair_quarters(pair_halves(v00, v01), pair_halves(v02, v03));  // j 0..3
  const __m512 q1 = pair_quarters(pair_halves(v10, v11), pair_halves(v12, v13));  // j 4..7
  const __m512 q2 = pair_quarters(pair_halves(v20, v21), pair_halves(v22, v23));  // j 8..11
  const __m512 q3 = pair_quarters(pair_halves(v30, v31), pair_halves(v32, v33));  // j 12..15
  // Level 3: quarter k of w01 holds j = k (2 lanes) then j = 4 + k; of w23, j = 8 + k then 12 + k.
  // Level 4: quarter k holds j = k, 4 + k, 8 + k, 12 + k: rows 0..3 of token k.
  return pair_lanes1(pair_lanes2(q0, q1), pair_lanes2(q2, q3));
}

KEEL_AVX512F inline __m128 quarter(__m512 v, int k) {
  switch (k) {
    case 0: return _mm512_extractf32x4_ps(v, 0);
    case 1: return _mm512_extractf32x4_ps(v, 1);
    case 2: return _mm512_extractf32x4_ps(v, 2);
    default: return _mm512_extractf32x4_ps(v, 3);
  }
}

#undef KEEL_AVX512F

}  // namespace keel::ops::avx512
