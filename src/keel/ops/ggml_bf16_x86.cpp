#include "keel/ops/ggml_bf16_x86.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

#include "keel/ops/simd_target.h"
#include "keel/util/error.h"
#include "keel/util/half.h"

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12's _mm512_reduce_add_ps trips a false -Wuninitialized inside its own header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <cpuid.h>
#include <immintrin.h>

#include "keel/ops/avx512_reduce.h"

namespace keel::ops {
namespace {

#define KEEL_GGML_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vbmi,f16c")))
#define KEEL_GGML_TARGET_LAMBDA KEEL_GGML_TARGET __attribute__((always_inline))

// How every format is run. A superblock (kBlocks ggml blocks, kElems elements) is widened into V
// vectors of 32 bf16 codes, one vector of 16 per-lane scales and, for the K formats with mins, one
// of 16 per-lane mins. Word w of vector v holds element element_of(v, w) of the superblock, and
// float lane i (words 2i, 2i+1) of every vector of a superblock lies in the same scale's elements,
// so for one (row, token):
//   g = sum over v, in order, of VDPBF16PS(codes[v], x[v]);  acc = fma(scale, g, acc);
//   acc = fnmadd(mins, lane_sums, acc)   (Q4_K, Q5_K: the -dmin*m*sum(x) term, per lane)
// and the output is reduce_add(acc). Both the one-token and the panel kernels run exactly this.
// A row's last superblock may hold fewer blocks (Q8_0 .. MXFP4 with cols / 32 not a multiple of
// 4): it is widened from a zero-padded copy (zero scales), against zero activations.

constexpr uint16_t bf16_of(float f) { return static_cast<uint16_t>(std::bit_cast<uint32_t>(f) >> 16); }

// VPERMW tables: index bits above 4 are ignored, so 4-bit tables repeat in their upper half.
template <class Fn>
constexpr std::array<uint16_t, 32> table32(Fn value) {
  std::array<uint16_t, 32> t{};
  for (int k = 0; k < 32; ++k) t[static_cast<size_t>(k)] = bf16_of(static_cast<float>(value(k)));
  return t;
}
constexpr auto kQ4_0Codes = table32([](int k) { return (k & 15) - 8; });
constexpr auto kQ5_0Codes = table32([](int k) { return k - 16; });
constexpr auto kNibbleCodes = table32([](int k) { return k & 15; });
constexpr auto kFiveBitCodes = table32([](int k) { return k; });
constexpr auto kMxfp4Codes = table32([](int k) { return kGgmlTwiceE2m1[k & 15]; });
constexpr auto kSixBitLow = table32([](int k) { return k - 32; });  // Q6_K codes 0..31
constexpr auto kSixBitHigh = table32([](int k) { return k; });      // Q6_K codes 32..63

// Per-word (16-bit) and per-dword constant vectors, built at compile time.
template <class Fn>
constexpr std::array<uint16_t, 32> words(Fn f) {
  std::array<uint16_t, 32> t{};
  for (int w = 0; w < 32; ++w) t[static_cast<size_t>(w)] = static_cast<uint16_t>(f(w));
  return t;
}
template <class Fn>
constexpr std::array<int32_t, 16> dwords(Fn f) {
  std::array<int32_t, 16> t{};
  for (int i = 0; i < 16; ++i) t[static_cast<size_t>(i)] = static_cast<int32_t>(f(i));
  return t;
}

template <size_t N, class T>
KEEL_GGML_TARGET inline __m512i vec(const std::array<T, N>& a) {
  return _mm512_loadu_si512(a.data());
}

KEEL_GGML_TARGET inline __m512 dp(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
}

// (a & 0x000F per word) | b: a nibble (a's other bits dropped) under a fifth/sixth bit already
// shifted to bit 4 of b (b's bits 0..3 are zero; bits above the table's index width are ignored).
KEEL_GGML_TARGET inline __m512i nibble_or(__m512i a, __m512i b) {
  return _mm512_ternarylogic_epi32(a, b, _mm512_set1_epi16(0x000F), 0xEC);
}

KEEL_GGML_TARGET inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// Lane i -> value i / 4 of a vector of four (the per-block scales of 4-block superblocks).
constexpr auto kQuarterLanes = dwords([](int i) { return i / 4; });

// Four f16 scales, 'stride' bytes apart, one per four lanes.
KEEL_GGML_TARGET inline __m512 four_half_scales(const uint8_t* p, int stride) {
  uint16_t h[4];
  for (int k = 0; k < 4; ++k) std::memcpy(&h[k], p + k * stride, 2);
  uint64_t packed;
  std::memcpy(&packed, h, 8);
  const __m128 f = _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(packed)));
  return _mm512_permutexvar_ps(vec(kQuarterLanes), _mm512_zextps128_ps512(f));
}

// The 16 code bytes of four 32-element blocks, block k in 128-bit lane k.
KEEL_GGML_TARGET inline __m512i four_blocks(const uint8_t* p, int stride) {
  __m512i r = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  r = _mm512_inserti32x4(r, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + stride)), 1);
  r = _mm512_inserti32x4(r, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * stride)), 2);
  return _mm512_inserti32x4(r, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 3 * stride)), 3);
}

// ---- Q8_0: 4 blocks. Vector v: bytes 8v..8v+7 of each block, block k in words 8k..8k+7, so
// float lane i lies in block i / 4. int8 -> int32 -> float -> bf16, all exact.
struct Q8_0F {
  static constexpr int kBlocks = 4, kBlockBytes = 34, kElems = 128, V = 4;
  static constexpr bool kMins = false;
  static constexpr int element_of(int v, int w) { return 32 * (w / 8) + 8 * v + w % 8; }
  KEEL_GGML_TARGET static void widen(const uint8_t* p, __m512i* c, __m512& scale, __m512&) {
    for (int v = 0; v < 4; ++v) {
      const uint8_t* q = p + 2 + 8 * v;
      const __m128i b01 = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q)),
                                             _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + 34)));
      const __m128i b23 = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + 68)),
                                             _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + 102)));
      const __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b01));
      const __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b23));
      c[v] = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
    }
    scale = four_half_scales(p, 34);
  }
};

// ---- Q4_0, Q5_0, MXFP4: 4 blocks, block k's 16 code bytes in 128-bit lane k. Vector n takes
// nibble n of every 16-bit word (a shift, then a table lookup), so float lane i lies in block i / 4.
constexpr int nibble_element(int n, int w) { return 32 * (w / 8) + 2 * (w % 8) + n / 2 + 16 * (n % 2); }

struct Q4_0F {
  static constexpr int kBlocks = 4, kBlockBytes = 18, kElems = 128, V = 4;
  static constexpr bool kMins = false;
  static constexpr int element_of(int v, int w) { return nibble_element(v, w); }
  KEEL_GGML_TARGET static void widen(const uint8_t* p, __m512i* c, __m512& scale, __m512&) {
    const __m512i r = four_blocks(p + 2, 18), t = vec(kQ4_0Codes);
    c[0] = _mm512_permutexvar_epi16(r, t);
    c[1] = _mm512_permutexvar_epi16(_mm512_srli_epi16(r, 4), t);
    c[2] = _mm512_permutexvar_epi16(_mm512_srli_epi16(r, 8), t);
    c[3] = _mm512_permutexvar_epi16(_mm512_srli_epi16(r, 12), t);
    scale = four_half_scales(p, 18);
  }
};

struct Mxfp4F {
  static constexpr int kBlocks = 4, kBlockBytes = 17, kElems = 128, V = 4;
  static constexpr bool kMins = false;
  static constexpr int element_of(int v, int w) { return nibble_element(v, w); }
  KEEL_GGML_TARGET static void widen(const uint8_t* p, __m512i* c, __m512& scale, __m512&) {
    const __m512i r = four_blocks(p + 1, 17), t = vec(kMxfp4Codes);
    c[0] = _mm512_permutexvar_epi16(r, t);
    c[1] = _mm512_permutexvar_epi16(_mm512_srli_epi16(r, 4), t);
    c[2] = _mm512_permutexvar_epi16(_mm512_srli_epi16(r, 8), t);
    c[3] = _mm512_permutexvar_epi16(_mm512_srli_epi16(r, 12), t);
    const __m128 s = _mm_castsi128_ps(_mm_setr_epi32(
        static_cast<int>(ggml_e8m0_half_bits(p[0])), static_cast<int>(ggml_e8m0_half_bits(p[17])),
        static_cast<int>(ggml_e8m0_half_bits(p[34])), static_cast<int>(ggml_e8m0_half_bits(p[51]))));
    scale = _mm512_permutexvar_ps(vec(kQuarterLanes), _mm512_zextps128_ps512(s));
  }
};

// Q5_0: bit j (j + 16) of a block's qh word is bit 4 of element j (j + 16). Word w of vector n
// holds element 2(w%8) + n/2 + 16(n%2) of block w/8: bit 2(w%8) + n/2 of the half n%2 of qh.
constexpr auto kQhHalfLo = words([](int w) { return 2 * (w / 8); });
constexpr auto kQhHalfHi = words([](int w) { return 2 * (w / 8) + 1; });
constexpr auto kQ5_0Shift0 = words([](int w) { return 2 * (w % 8); });
constexpr auto kQ5_0Shift1 = words([](int w) { return 2 * (w % 8) + 1; });

struct Q5_0F {
  static constexpr int kBlocks = 4, kBlockBytes = 22, kElems = 128, V = 4;
  static constexpr bool kMins = false;
  static constexpr int element_of(int v, int w) { return nibble_element(v, w); }
  KEEL_GGML_TARGET static void widen(const uint8_t* p, __m512i* c, __m512& scale, __m512&) {
    const __m512i r = four_blocks(p + 6, 22), t = vec(kQ5_0Codes);
    int32_t h[4];
    for (int k = 0; k < 4; ++k) std::memcpy(&h[k], p + 22 * k + 2, 4);
    const __m512i hv = _mm512_zextsi128_si512(_mm_setr_epi32(h[0], h[1], h[2], h[3]));
    const __m512i half[2] = {_mm512_permutexvar_epi16(vec(kQhHalfLo), hv), _mm512_permutexvar_epi16(vec(kQhHalfHi), hv)};
    const __m512i shift[2] = {vec(kQ5_0Shift0), vec(kQ5_0Shift1)};
    const __m512i nib[4] = {r, _mm512_srli_epi16(r, 4), _mm512_srli_epi16(r, 8), _mm512_srli_epi16(r, 12)};
    for (int n = 0; n < 4; ++n) {
      const __m512i hb = _mm512_slli_epi16(_mm512_srlv_epi16(half[n % 2], shift[n / 2]), 4);
      c[n] = _mm512_permutexvar_epi16(nibble_or(nib[n], hb), t);
    }
    scale = four_half_scales(p, 22);
  }
};

// ---- Q4_K, Q5_K: one block, lane i in sub-block i / 2. Chunk k (64 elements) is qs[32k, 32k+32):
// low nibbles elements 64k + l, high nibbles 64k + 32 + l. R_r holds bytes 16r..16r+15 of every
// chunk (chunk k in 128-bit lane k); its rotation by 8 bytes within lanes is R'_r. Vector
// v = 4r + 2q + p reads R_r (q = 0) or R'_r (q = 1): in each lane, words 0..3 (float lanes 4k, 4k+1:
// sub-block 2k) take low nibbles and words 4..7 (sub-block 2k + 1) high nibbles, of byte p of the word.
constexpr int k_element(int v, int w) {
  const int r = v / 4, q = (v / 2) % 2, p = v % 2, k = w / 8, wl = w % 8;
  return 64 * k + 32 * (wl >= 4 ? 1 : 0) + 16 * r + (2 * wl + 8 * q) % 16 + p;
}
constexpr auto kKShift0 = words([](int w) { return w % 8 >= 4 ? 4 : 0; });
constexpr auto kKShift1 = words([](int w) { return w % 8 >= 4 ? 12 : 8; });
// Q5_K: element (chunk k, half h, byte l) takes bit 2k + h = sub-block w / 4 of qh[l]; qh's bytes
// sit where R_r's do, so the same rotation lines them up; byte p of the word.
constexpr auto kQ5KShift0 = words([](int w) { return w / 4; });
constexpr auto kQ5KShift1 = words([](int w) { return 8 + w / 4; });

// The 8 scales and mins of a Q4_K/Q5_K block, lane i -> sub-block i / 2, times d and dmin.
// get_scale_min_k4 on four bytes at once: scales[0..3] low 6 bits are sc 0..3, [4..7] m 0..3; sc
// and m 4..7 are the nibbles of [8..11] under the top two bits of [0..3] and [4..7]. (Scalar
// unpacking through memory stalled on store forwarding: Q4_K decode ran at 4.2 GB/s.)
KEEL_GGML_TARGET inline void k_scales(const uint8_t* p, __m512& scale, __m512& mins) {
  uint32_t d0, d1, d2;
  std::memcpy(&d0, p + 4, 4);
  std::memcpy(&d1, p + 8, 4);
  std::memcpy(&d2, p + 12, 4);
  const uint32_t sc_lo = d0 & 0x3F3F3F3Fu, sc_hi = (d2 & 0x0F0F0F0Fu) | ((d0 >> 2) & 0x30303030u);
  const uint32_t m_lo = d1 & 0x3F3F3F3Fu, m_hi = ((d2 >> 4) & 0x0F0F0F0Fu) | ((d1 >> 2) & 0x30303030u);
  const __m128i both = _mm_setr_epi32(static_cast<int>(sc_lo), static_cast<int>(sc_hi), static_cast<int>(m_lo),
                                      static_cast<int>(m_hi));
  // Each byte twice: lanes 2j and 2j + 1 take sub-block j.
  const __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(both, both)));
  const __m512 mn = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi8(both, both)));
  scale = _mm512_mul_ps(_mm512_set1_ps(half_at(p)), sc);
  mins = _mm512_mul_ps(_mm512_set1_ps(half_at(p + 2)), mn);
}

template <bool kFifthBit>
struct QKF {
  static constexpr int kBlocks = 1, kBlockBytes = kFifthBit ? 176 : 144, kElems = 256, V = 8;
  static constexpr bool kMins = true;
  static constexpr int element_of(int v, int w) { return k_element(v, w); }
  KEEL_GGML_TARGET static void widen(const uint8_t* p, __m512i* c, __m512& scale, __m512& mins) {
    const uint8_t* qs = p + (kFifthBit ? 48 : 16);
    const __m512i a = _mm512_loadu_si512(qs), b = _mm512_loadu_si512(qs + 64);
    const __m512i r[2] = {_mm512_shuffle_i64x2(a, b, 0x88), _mm512_shuffle_i64x2(a, b, 0xDD)};
    const __m512i shift[2] = {vec(kKShift0), vec(kKShift1)};
    if constexpr (!kFifthBit) {
      const __m512i t = vec(kNibbleCodes);
      for (int i = 0; i < 2; ++i) {
        const __m512i src[2] = {r[i], _mm512_shuffle_epi32(r[i], static_cast<_MM_PERM_ENUM>(0x4E))};
        for (int q = 0; q < 2; ++q)
          for (int pp = 0; pp < 2; ++pp)
            c[4 * i + 2 * q + pp] = _mm512_permutexvar_epi16(_mm512_srlv_epi16(src[q], shift[pp]), t);
      }
    } else {
      const __m512i t = vec(kFiveBitCodes);
      const __m512i hshift[2] = {vec(kQ5KShift0), vec(kQ5KShift1)};
      for (int i = 0; i < 2; ++i) {
        const __m512i qh = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 + 16 * i)));
        const __m512i src[2] = {r[i], _mm512_shuffle_epi32(r[i], static_cast<_MM_PERM_ENUM>(0x4E))};
        const __m512i hsrc[2] = {qh, _mm512_shuffle_epi32(qh, static_cast<_MM_PERM_ENUM>(0x4E))};
        for (int q = 0; q < 2; ++q)
          for (int pp = 0; pp < 2; ++pp) {
            const __m512i hb = _mm512_slli_epi16(_mm512_srlv_epi16(hsrc[q], hshift[pp]), 4);
            c[4 * i + 2 * q + pp] = _mm512_permutexvar_epi16(nibble_or(_mm512_srlv_epi16(src[q], shift[pp]), hb), t);
          }
      }
    }
    k_scales(p, scale, mins);
  }
};

// ---- Q6_K: one block, lane i = sub-block i (16 elements). ql byte 64n + b holds, low nibble then
// high, elements 128n + b and 128n + 64 + b; their two high bits are bits 2(b/32) (+4 for the high
// nibble) of qh[32n + b%32]. Lane i reads the ql group g = 4(i/8) + i%4 (16 bytes) and nibble
// (i/4)%2: vector v = 2m + p takes dword m of that group (VPERMT2D), byte p of each word.
constexpr int q6_element(int v, int w) {
  const int m = v / 2, p = v % 2, i = w / 2, t = 2 * (w % 2) + p;
  return 128 * (i / 8) + 64 * ((i / 4) % 2) + 16 * (i % 4) + 4 * m + t;
}
template <int M>
constexpr auto kQ6Ql = dwords([](int i) { return 4 * (4 * (i / 8) + i % 4) + M; });
template <int M>
constexpr auto kQ6Qh = dwords([](int i) { return 8 * (i / 8) + 4 * (i % 2) + M; });
constexpr auto kQ6Shift0 = words([](int w) { return 4 * ((w / 8) % 2); });
constexpr auto kQ6Shift1 = words([](int w) { return 8 + 4 * ((w / 8) % 2); });
constexpr auto kQ6HShift0 = words([](int w) { return 2 * ((w / 2) % 4 / 2) + 4 * ((w / 8) % 2); });
constexpr auto kQ6HShift1 = words([](int w) { return 8 + 2 * ((w / 2) % 4 / 2) + 4 * ((w / 8) % 2); });

struct Q6KF {
  static constexpr int kBlocks = 1, kBlockBytes = 210, kElems = 256, V = 8;
  static constexpr bool kMins = false;
  static constexpr int element_of(int v, int w) { return q6_element(v, w); }
  KEEL_GGML_TARGET static void widen(const uint8_t* p, __m512i* c, __m512& scale, __m512&) {
    const __m512i l0 = _mm512_loadu_si512(p), l1 = _mm512_loadu_si512(p + 64), qh = _mm512_loadu_si512(p + 128);
    const __m512i tlo = vec(kSixBitLow), thi = vec(kSixBitHigh);
    const __m512i shift[2] = {vec(kQ6Shift0), vec(kQ6Shift1)}, hshift[2] = {vec(kQ6HShift0), vec(kQ6HShift1)};
    const __m512i ql_idx[4] = {vec(kQ6Ql<0>), vec(kQ6Ql<1>), vec(kQ6Ql<2>), vec(kQ6Ql<3>)};
    const __m512i qh_idx[4] = {vec(kQ6Qh<0>), vec(kQ6Qh<1>), vec(kQ6Qh<2>), vec(kQ6Qh<3>)};
    for (int m = 0; m < 4; ++m) {
      const __m512i d = _mm512_permutex2var_epi32(l0, ql_idx[m], l1);
      const __m512i h = _mm512_permutexvar_epi32(qh_idx[m], qh);
      for (int pp = 0; pp < 2; ++pp) {
        const __m512i hb = _mm512_slli_epi16(_mm512_srlv_epi16(h, hshift[pp]), 4);
        c[2 * m + pp] = _mm512_permutex2var_epi16(tlo, nibble_or(_mm512_srlv_epi16(d, shift[pp]), hb), thi);
      }
    }
    const __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192))));
    scale = _mm512_mul_ps(_mm512_set1_ps(half_at(p + 208)), sc);
  }
};

template <class F>
constexpr std::array<int16_t, F::V * 32> kElementOf = [] {
  std::array<int16_t, F::V * 32> t{};
  for (int v = 0; v < F::V; ++v)
    for (int w = 0; w < 32; ++w) t[static_cast<size_t>(v * 32 + w)] = static_cast<int16_t>(F::element_of(v, w));
  return t;
}();

template <class F>
int64_t supers_of(const GgmlRows& w) {
  const int64_t blocks = w.cols / (F::kElems / F::kBlocks);
  return (blocks + F::kBlocks - 1) / F::kBlocks;
}

// Superblock s of row `row`: codes, scales, mins.
template <class F>
KEEL_GGML_TARGET inline void widen_super(const GgmlRows& w, int64_t row, int64_t s, __m512i* c, __m512& scale,
                                         __m512& mins) {
  const uint8_t* p = w.data + row * w.row_bytes + s * F::kBlocks * F::kBlockBytes;
  if constexpr (F::kBlocks > 1) {
    const int64_t left = w.cols / (F::kElems / F::kBlocks) - s * F::kBlocks;
    if (left < F::kBlocks) {
      alignas(64) uint8_t pad[F::kBlocks * F::kBlockBytes + 16] = {};
      std::memcpy(pad, p, static_cast<size_t>(left * F::kBlockBytes));
      F::widen(pad, c, scale, mins);
      return;
    }
  }
  F::widen(p, c, scale, mins);
}

// One token: each row's superblocks widened in registers and used at once, one row after another
// so the bytes stream in order, with a prefetch 4 KiB ahead (as the MLX decode kernel).
template <class F>
KEEL_GGML_TARGET void rows_one_token(const GgmlRows& w, const GgmlBf16Activations& a, int64_t r0, int64_t r1,
                                     float* y) {
  const int64_t supers = supers_of<F>(w);
  const uint16_t* x = a.x.data();
  const float* sums = a.lane_sums.data();
  for (int64_t r = r0; r < r1; ++r) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t s = 0; s < supers; ++s) {
      const char* next = reinterpret_cast<const char*>(w.data + r * w.row_bytes + s * F::kBlocks * F::kBlockBytes + 4096);
      _mm_prefetch(next, _MM_HINT_T0);
      if constexpr (F::kBlocks * F::kBlockBytes > 64) _mm_prefetch(next + 64, _MM_HINT_T0);
      if constexpr (F::kBlocks * F::kBlockBytes > 128) _mm_prefetch(next + 128, _MM_HINT_T0);
      if constexpr (F::kBlocks * F::kBlockBytes > 192) _mm_prefetch(next + 192, _MM_HINT_T0);
      __m512i c[F::V];
      __m512 scale, mins = _mm512_setzero_ps();
      widen_super<F>(w, r, s, c, scale, mins);
      const uint16_t* xs = x + s * F::V * 32;
      __m512 g = _mm512_setzero_ps();
      for (int v = 0; v < F::V; ++v) g = dp(g, c[v], _mm512_loadu_si512(xs + v * 32));
      acc = _mm512_fmadd_ps(scale, g, acc);
      if constexpr (F::kMins) acc = _mm512_fnmadd_ps(mins, _mm512_loadu_ps(sums + s * 16), acc);
    }
    y[r - r0] = _mm512_reduce_add_ps(acc);
  }
}

// The panel: per row, per superblock, V * 32 bf16 codes then 16 float scales (then 16 float mins).
template <class F>
constexpr int64_t kPanelSuperBytes = F::V * 64 + 64 + (F::kMins ? 64 : 0);

// NR rows by NT tokens against the panel, the same per-(row, token) sequence as rows_one_token.
// Generic form for the edges.
template <class F, int NR, int NT>
KEEL_GGML_TARGET void panel_tile(const uint8_t* const* rows, int64_t supers, const GgmlBf16Activations& a, int64_t t,
                                 float* y, int64_t y_stride) {
  __m512 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int u = 0; u < NT; ++u) acc[r][u] = _mm512_setzero_ps();
  for (int64_t s = 0; s < supers; ++s) {
    __m512 g[NR][NT];
    for (int r = 0; r < NR; ++r)
      for (int u = 0; u < NT; ++u) g[r][u] = _mm512_setzero_ps();
    for (int v = 0; v < F::V; ++v) {
      const int64_t off = (s * F::V + v) * 32;
      __m512i xv[NT];
      for (int u = 0; u < NT; ++u) xv[u] = _mm512_loadu_si512(a.x.data() + (t + u) * a.x_stride + off);
      for (int r = 0; r < NR; ++r) {
        const __m512i wv = _mm512_loadu_si512(rows[r] + s * kPanelSuperBytes<F> + v * 64);
        for (int u = 0; u < NT; ++u) g[r][u] = dp(g[r][u], wv, xv[u]);
      }
    }
    for (int r = 0; r < NR; ++r) {
      const uint8_t* sb = rows[r] + s * kPanelSuperBytes<F> + F::V * 64;
      const __m512 scale = _mm512_loadu_ps(sb);
      for (int u = 0; u < NT; ++u) acc[r][u] = _mm512_fmadd_ps(scale, g[r][u], acc[r][u]);
      if constexpr (F::kMins) {
        const __m512 mins = _mm512_loadu_ps(sb + 64);
        for (int u = 0; u < NT; ++u)
          acc[r][u] = _mm512_fnmadd_ps(mins, _mm512_loadu_ps(a.lane_sums.data() + (t + u) * a.sums_stride + s * 16),
                                       acc[r][u]);
      }
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int u = 0; u < NT; ++u) y[u * y_stride + r] = _mm512_reduce_add_ps(acc[r][u]);
}

// The hot tile, 4 rows by 3 tokens, in named variables (GCC keeps an array of vectors in memory
// across iterations): 12 partial sums, 12 running sums, 3 activation vectors and a weight vector
// fit AVX-512's 32 registers. A 4x4 tile (16 + 16 + 4 + 1) kept its running sums in memory, a load
// and a store each per superblock beside the scale's FMA: 4x3 prefills Q4_0 8% faster on Zen 4.
template <class F>
KEEL_GGML_TARGET void panel_tile43(const uint8_t* const* rows, int64_t supers, const GgmlBf16Activations& a, int64_t t,
                                   float* y, int64_t y_stride) {
  const __m512 zero = _mm512_setzero_ps();
  __m512 a00 = zero, a01 = zero, a02 = zero, a10 = zero, a11 = zero, a12 = zero;
  __m512 a20 = zero, a21 = zero, a22 = zero, a30 = zero, a31 = zero, a32 = zero;
  const uint16_t* x0 = a.x.data() + t * a.x_stride;
  const uint16_t *x1 = x0 + a.x_stride, *x2 = x1 + a.x_stride;
  const float* s0 = a.lane_sums.data() + t * a.sums_stride;
  const float *s1 = s0 + a.sums_stride, *s2 = s1 + a.sums_stride;
  for (int64_t s = 0; s < supers; ++s) {
    const int64_t so = s * kPanelSuperBytes<F>;
    const uint8_t *w0 = rows[0] + so, *w1 = rows[1] + so, *w2 = rows[2] + so, *w3 = rows[3] + so;
    __m512 g00 = zero, g01 = zero, g02 = zero, g10 = zero, g11 = zero, g12 = zero;
    __m512 g20 = zero, g21 = zero, g22 = zero, g30 = zero, g31 = zero, g32 = zero;
    for (int v = 0; v < F::V; ++v) {
      const int64_t off = (s * F::V + v) * 32;
      const __m512i v0 = _mm512_loadu_si512(x0 + off), v1 = _mm512_loadu_si512(x1 + off), v2 = _mm512_loadu_si512(x2 + off);
      __m512i wv = _mm512_loadu_si512(w0 + v * 64);
      g00 = dp(g00, wv, v0), g01 = dp(g01, wv, v1), g02 = dp(g02, wv, v2);
      wv = _mm512_loadu_si512(w1 + v * 64);
      g10 = dp(g10, wv, v0), g11 = dp(g11, wv, v1), g12 = dp(g12, wv, v2);
      wv = _mm512_loadu_si512(w2 + v * 64);
      g20 = dp(g20, wv, v0), g21 = dp(g21, wv, v1), g22 = dp(g22, wv, v2);
      wv = _mm512_loadu_si512(w3 + v * 64);
      g30 = dp(g30, wv, v0), g31 = dp(g31, wv, v1), g32 = dp(g32, wv, v2);
    }
    // Row r's running sums take its scale (and mins), in the order of rows_one_token.
    auto scale_row = [&](const uint8_t* w, __m512 g0, __m512 g1, __m512 g2, __m512& r0, __m512& r1, __m512& r2)
                         KEEL_GGML_TARGET_LAMBDA {
      const __m512 scale = _mm512_loadu_ps(w + F::V * 64);
      r0 = _mm512_fmadd_ps(scale, g0, r0), r1 = _mm512_fmadd_ps(scale, g1, r1), r2 = _mm512_fmadd_ps(scale, g2, r2);
      if constexpr (F::kMins) {
        const __m512 mins = _mm512_loadu_ps(w + F::V * 64 + 64);
        r0 = _mm512_fnmadd_ps(mins, _mm512_loadu_ps(s0 + s * 16), r0);
        r1 = _mm512_fnmadd_ps(mins, _mm512_loadu_ps(s1 + s * 16), r1);
        r2 = _mm512_fnmadd_ps(mins, _mm512_loadu_ps(s2 + s * 16), r2);
      }
    };
    scale_row(w0, g00, g01, g02, a00, a01, a02);
    scale_row(w1, g10, g11, g12, a10, a11, a12);
    scale_row(w2, g20, g21, g22, a20, a21, a22);
    scale_row(w3, g30, g31, g32, a30, a31, a32);
  }
  // reduce16 (bit for bit _mm512_reduce_add_ps of each) with a fourth token of zeros.
  const __m512 sums = avx512::reduce16(a00, a01, a02, zero, a10, a11, a12, zero, a20, a21, a22, zero, a30, a31, a32, zero);
  for (int u = 0; u < 3; ++u) _mm_storeu_ps(y + u * y_stride, avx512::quarter(sums, u));
}

// Several tokens: widen the task's rows once into a panel, then walk token blocks outermost so a
// block's activations stay in L1 while the panel (rows x cols x ~2 bytes, in L2) passes by.
template <class F>
KEEL_GGML_TARGET void rows_many_tokens(const GgmlRows& w, const GgmlBf16Activations& a, int64_t n_tokens, int64_t r0,
                                       int64_t r1, float* y, int64_t y_stride) {
  const int64_t supers = supers_of<F>(w);
  const int64_t row_bytes = supers * kPanelSuperBytes<F>;
  thread_local std::vector<uint8_t> panel;
  panel.resize(static_cast<size_t>((r1 - r0) * row_bytes));
  for (int64_t r = r0; r < r1; ++r) {
    uint8_t* out = panel.data() + (r - r0) * row_bytes;
    for (int64_t s = 0; s < supers; ++s) {
      __m512i c[F::V];
      __m512 scale, mins = _mm512_setzero_ps();
      widen_super<F>(w, r, s, c, scale, mins);
      uint8_t* o = out + s * kPanelSuperBytes<F>;
      for (int v = 0; v < F::V; ++v) _mm512_storeu_si512(o + v * 64, c[v]);
      _mm512_storeu_ps(o + F::V * 64, scale);
      if constexpr (F::kMins) _mm512_storeu_ps(o + F::V * 64 + 64, mins);
    }
  }
  auto rows_at = [&](int64_t r, int k, const uint8_t** p) {
    for (int i = 0; i < k; ++i) p[i] = panel.data() + (r - r0 + i) * row_bytes;
  };
  int64_t t = 0;
  const uint8_t* p[4];
  for (; t + 3 <= n_tokens; t += 3) {
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) {
      rows_at(r, 4, p);
      panel_tile43<F>(p, supers, a, t, y + t * y_stride + (r - r0), y_stride);
    }
    for (; r < r1; ++r) {
      rows_at(r, 1, p);
      panel_tile<F, 1, 3>(p, supers, a, t, y + t * y_stride + (r - r0), y_stride);
    }
  }
  for (; t < n_tokens; ++t) {
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) {
      rows_at(r, 4, p);
      panel_tile<F, 4, 1>(p, supers, a, t, y + t * y_stride + (r - r0), y_stride);
    }
    for (; r < r1; ++r) {
      rows_at(r, 1, p);
      panel_tile<F, 1, 1>(p, supers, a, t, y + t * y_stride + (r - r0), y_stride);
    }
  }
}

template <class F>
KEEL_GGML_TARGET void prepare(const GgmlRows& w, const float* x, int64_t t0, int64_t t1, GgmlBf16Activations& a) {
  const int64_t cols = w.cols, supers = supers_of<F>(w);
  thread_local std::vector<uint16_t> rounded;
  rounded.assign(static_cast<size_t>(supers * F::kElems), 0);
  for (int64_t t = t0; t < t1; ++t) {
    const float* xt = x + t * cols;
    int64_t c = 0;
    for (; c + 16 <= cols; c += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(rounded.data() + c),
                          reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_loadu_ps(xt + c))));
    for (; c < cols; ++c) rounded[static_cast<size_t>(c)] = float_to_bf16(xt[c]);
    uint16_t* out = a.x.data() + t * a.x_stride;
    for (int64_t s = 0; s < supers; ++s) {
      const uint16_t* in = rounded.data() + s * F::kElems;
      uint16_t* o = out + s * F::V * 32;
      for (int i = 0; i < F::V * 32; ++i) o[i] = in[kElementOf<F>[static_cast<size_t>(i)]];
      if constexpr (F::kMins) {
        // Each float lane's sum of its rounded activations, vector by vector (fixed order).
        __m512 sum = _mm512_setzero_ps();
        for (int v = 0; v < F::V; ++v) {
          const __m512i xv = _mm512_loadu_si512(o + v * 32);
          const __m512 even = _mm512_castsi512_ps(_mm512_slli_epi32(xv, 16));
          const __m512 odd = _mm512_castsi512_ps(_mm512_and_si512(xv, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
          sum = _mm512_add_ps(_mm512_add_ps(sum, even), odd);
        }
        _mm512_storeu_ps(a.lane_sums.data() + t * a.sums_stride + s * 16, sum);
      }
    }
  }
}

template <class Fn>
void with_format(WeightFormat f, Fn&& fn) {
  switch (f) {
    case WeightFormat::Q8_0: fn(Q8_0F{}); break;
    case WeightFormat::Q4_0: fn(Q4_0F{}); break;
    case WeightFormat::Q5_0: fn(Q5_0F{}); break;
    case WeightFormat::Q4_K: fn(QKF<false>{}); break;
    case WeightFormat::Q5_K: fn(QKF<true>{}); break;
    case WeightFormat::Q6_K: fn(Q6KF{}); break;
    case WeightFormat::MXFP4_GGUF: fn(Mxfp4F{}); break;
    default: break;
  }
}

// Zen 4: AMD family 19h (Zen 3 has no AVX-512). It runs each 512-bit instruction as two 256-bit
// halves, so its VDPBF16PS multiplies no more pairs per cycle than VPDPWSSD.
bool is_zen4() {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return false;
  char vendor[12];
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  if (std::memcmp(vendor, "AuthenticAMD", 12) != 0 || !__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const unsigned base = (eax >> 8) & 0xF, family = base == 0xF ? base + ((eax >> 20) & 0xFF) : base;
  return family == 0x19;
}

}  // namespace

bool ggml_bf16_supported(WeightFormat f) {
  // F16C is not asked for: every CPU with AVX512_BF16 has it, and clang 14 (the fuzz build's
  // compiler) does not know the name.
  static const bool cpu = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512dq");
  if (!cpu || !avx512_kernels_allowed() || !is_ggml_block_format(f)) return false;
  // On Zen 4 the int16 kernels with VPDPWSSD (int16_dot.h) ran Q8_0, Q5_0 and the K formats faster
  // end to end; this kernel's rows streamed one at a time still decoded the densest, Q4_0 and
  // MXFP4, ~20% faster from memory. On Zen 5 this kernel led for every format (docs/performance.md,
  // "VPDPWSSD in the int16 kernels", 2026-12-07).
  static const bool zen4 = is_zen4();
  return !zen4 || f == WeightFormat::Q4_0 || f == WeightFormat::MXFP4_GGUF;
}

void size_ggml_bf16_activations(const GgmlRows& w, int64_t n_tokens, GgmlBf16Activations& a) {
  with_format(w.format, [&](auto fmt) {
    using F = decltype(fmt);
    const int64_t supers = supers_of<F>(w);
    a.x_stride = supers * F::V * 32;
    a.sums_stride = F::kMins ? supers * 16 : 0;
    a.x.resize(static_cast<size_t>(n_tokens * a.x_stride));
    a.lane_sums.resize(static_cast<size_t>(n_tokens * a.sums_stride));
  });
}

void prepare_ggml_bf16_activations(const GgmlRows& w, const float* x, int64_t t0, int64_t t1, GgmlBf16Activations& a) {
  with_format(w.format, [&](auto fmt) { prepare<decltype(fmt)>(w, x, t0, t1, a); });
}

void gemm_ggml_bf16(const GgmlRows& w, const GgmlBf16Activations& a, int64_t n_tokens, int64_t r0, int64_t r1,
                    float* y, int64_t y_stride) {
  if (w.interleaved) throw InternalError("gemm_ggml_bf16 reads rows as the file stores them, not interleaved");
  with_format(w.format, [&](auto fmt) {
    using F = decltype(fmt);
    if (n_tokens == 1) rows_one_token<F>(w, a, r0, r1, y);
    else rows_many_tokens<F>(w, a, n_tokens, r0, r1, y, y_stride);
  });
}

}  // namespace keel::ops

#pragma GCC diagnostic pop

#else  // not x86-64: never selected

namespace keel::ops {
bool ggml_bf16_supported(WeightFormat) { return false; }
void size_ggml_bf16_activations(const GgmlRows&, int64_t, GgmlBf16Activations&) {}
void prepare_ggml_bf16_activations(const GgmlRows&, const float*, int64_t, int64_t, GgmlBf16Activations&) {}
void gemm_ggml_bf16(const GgmlRows&, const GgmlBf16Activations&, int64_t, int64_t, int64_t, float*, int64_t) {}
}  // namespace keel::ops

#endif
