#include "keel/ops/mlx_bf16_x86.h"

#include <algorithm>
#include <array>

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

#define KEEL_MLX_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx512vbmi")))

// The layout. A superblock is 128 packed bytes of a row (256 elements at 4 bits, 128 at 8), widened
// into kVectors vectors of 32 bf16 codes. Float lane i of every one of them covers elements of one
// 32-element chunk of the superblock (chunk i/2 at 4 bits, i/4 at 8), so one vector of scales per
// superblock serves all its vectors: the dot products of a superblock are summed per lane, then
// scaled once. Widening, at 4 bits: the even and odd 8-byte words of the superblock go to two
// registers; each 16-bit lane then holds four codes, and a shift and a 32-entry table lookup
// (VPERMW, which ignores index bits above 4) turn code n into bf16. At 8 bits: VPERMB gathers
// 16 bytes into dwords, converted to float and packed to bf16 in pairs of vectors.
constexpr int64_t kSuperBytes = 128;
template <int kBits> constexpr int kVectors = kBits == 4 ? 8 : 4;
template <int kBits> constexpr int64_t kSuperElems = kBits == 4 ? 256 : 128;

// Element (within its superblock) of lane j of widened vector v.
template <int kBits>
constexpr int element_of(int v, int j) {
  if constexpr (kBits == 4) {
    const int a = v / 4, n = v % 4, p = j / 4, w = j % 4;
    return 32 * p + 16 * a + 4 * w + n;
  } else {
    return 32 * (j / 8) + 8 * v + j % 8;
  }
}

template <int kBits>
constexpr std::array<int16_t, kVectors<kBits> * 32> kElementOf = [] {
  std::array<int16_t, kVectors<kBits> * 32> t{};
  for (int v = 0; v < kVectors<kBits>; ++v)
    for (int j = 0; j < 32; ++j) t[static_cast<size_t>(v * 32 + j)] = static_cast<int16_t>(element_of<kBits>(v, j));
  return t;
}();

// Per row: where its packed bytes, scales and biases are, and how a superblock is masked.
struct Rows {
  const uint8_t* bytes;
  const float* scales;
  const float* biases;
  int64_t row_bytes, groups, supers;
  alignas(64) int32_t scale_lanes[16];  // float lane i -> group offset from the superblock's first group
  int log2_group;
};

KEEL_MLX_TARGET inline __m512 dp(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
}

KEEL_MLX_TARGET inline __mmask64 byte_mask(int64_t left) {
  return left >= 64 ? ~__mmask64{0} : left <= 0 ? __mmask64{0} : (__mmask64{1} << left) - 1;
}

template <int kBits>
Rows rows_of(const MlxRows& m) {
  Rows r;
  r.bytes = reinterpret_cast<const uint8_t*>(m.words);
  r.scales = m.scales;
  r.biases = m.biases;
  r.row_bytes = m.cols * kBits / 8;
  r.groups = m.cols / m.group_size;
  r.supers = (r.row_bytes + kSuperBytes - 1) / kSuperBytes;
  r.log2_group = 0;
  while ((1 << r.log2_group) < m.group_size) ++r.log2_group;
  for (int i = 0; i < 16; ++i) r.scale_lanes[i] = (32 * (kBits == 4 ? i / 2 : i / 4)) >> r.log2_group;
  return r;
}

// Superblock s of row `row` widened to bf16 codes, in the order element_of describes.
template <int kBits>
KEEL_MLX_TARGET inline void widen(const Rows& m, int64_t row, int64_t s, __m512i* out) {
  const uint8_t* p = m.bytes + row * m.row_bytes + s * kSuperBytes;
  const int64_t left = m.row_bytes - s * kSuperBytes;
  const __m512i a = _mm512_maskz_loadu_epi8(byte_mask(left), p);
  const __m512i b = _mm512_maskz_loadu_epi8(byte_mask(left - 64), p + 64);
  if constexpr (kBits == 4) {
    // bf16 of (i & 15) for i < 32: 1.0 is 0x3F80, and each value is exact.
    const __m512i table = _mm512_set_epi16(
        0x4170, 0x4160, 0x4150, 0x4140, 0x4130, 0x4120, 0x4110, 0x4100, 0x40E0, 0x40C0, 0x40A0, 0x4080, 0x4040,
        0x4000, 0x3F80, 0x0000, 0x4170, 0x4160, 0x4150, 0x4140, 0x4130, 0x4120, 0x4110, 0x4100, 0x40E0, 0x40C0,
        0x40A0, 0x4080, 0x4040, 0x4000, 0x3F80, 0x0000);
    const __m512i even = _mm512_permutex2var_epi64(a, _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0), b);
    const __m512i odd = _mm512_permutex2var_epi64(a, _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1), b);
    out[0] = _mm512_permutexvar_epi16(even, table);
    out[1] = _mm512_permutexvar_epi16(_mm512_srli_epi16(even, 4), table);
    out[2] = _mm512_permutexvar_epi16(_mm512_srli_epi16(even, 8), table);
    out[3] = _mm512_permutexvar_epi16(_mm512_srli_epi16(even, 12), table);
    out[4] = _mm512_permutexvar_epi16(odd, table);
    out[5] = _mm512_permutexvar_epi16(_mm512_srli_epi16(odd, 4), table);
    out[6] = _mm512_permutexvar_epi16(_mm512_srli_epi16(odd, 8), table);
    out[7] = _mm512_permutexvar_epi16(_mm512_srli_epi16(odd, 12), table);
  } else {
    // Vector c: bytes 8c..8c+7 and 32+8c..32+8c+7 of each half, one byte per dword.
    constexpr __mmask64 kLowByte = 0x1111111111111111ULL;
    for (int c = 0; c < 4; ++c) {
      const __m512i idx = _mm512_set_epi32(39 + 8 * c, 38 + 8 * c, 37 + 8 * c, 36 + 8 * c, 35 + 8 * c, 34 + 8 * c,
                                           33 + 8 * c, 32 + 8 * c, 7 + 8 * c, 6 + 8 * c, 5 + 8 * c, 4 + 8 * c,
                                           3 + 8 * c, 2 + 8 * c, 1 + 8 * c, 8 * c);
      const __m512 lo = _mm512_cvtepi32_ps(_mm512_maskz_permutexvar_epi8(kLowByte, idx, a));
      const __m512 hi = _mm512_cvtepi32_ps(_mm512_maskz_permutexvar_epi8(kLowByte, idx, b));
      out[c] = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
    }
  }
}

// The scale of each float lane's group in superblock s of row `row`. Scales are padded
// (weights.cpp), so reading 16 past the last row's groups is safe.
template <int kBits>
KEEL_MLX_TARGET inline __m512 scales_of(const Rows& m, int64_t row, int64_t s) {
  const int64_t g0 = (s * kSuperElems<kBits>) >> m.log2_group;
  return _mm512_permutexvar_ps(_mm512_load_si512(m.scale_lanes), _mm512_loadu_ps(m.scales + row * m.groups + g0));
}

// Every (row, token) ends the same way: the biases against the token's group sums, added to the
// scaled code products, then one reduction.
KEEL_MLX_TARGET inline float finish(const Rows& m, int64_t row, __m512 acc, const float* sums) {
  const float* b = m.biases + row * m.groups;
  __m512 bias = _mm512_setzero_ps();
  for (int64_t g = 0; g < m.groups; g += 16) {
    const __mmask16 k = m.groups - g >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << (m.groups - g)) - 1u);
    bias = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, b + g), _mm512_loadu_ps(sums + g), bias);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc, bias));
}

// One token: each row's superblocks are widened in registers and used at once, one row after
// another so the bytes stream in order, with a prefetch 4 KiB ahead. (Four rows at a time, with
// four chains of products in flight, was faster from cache but slower from memory: Qwen2.5-0.5B
// decode 21-25 -> 28-30 tok/s at 4 bits, 8-bit's 152k x 896 head 9 -> 16 GMAC/s on one thread.)
template <int kBits>
KEEL_MLX_TARGET void rows_one_token(const Rows& m, const MlxBf16Activations& a, int64_t r0, int64_t r1, float* y) {
  constexpr int V = kVectors<kBits>;
  const uint16_t* x = a.x.data();
  for (int64_t r = r0; r < r1; ++r) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t s = 0; s < m.supers; ++s) {
      __m512i codes[V];
      const uint8_t* next = m.bytes + r * m.row_bytes + s * kSuperBytes + 4096;
      _mm_prefetch(reinterpret_cast<const char*>(next), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(next + 64), _MM_HINT_T0);
      widen<kBits>(m, r, s, codes);
      const uint16_t* xs = x + s * V * 32;
      __m512 g = _mm512_setzero_ps();
      for (int v = 0; v < V; ++v) g = dp(g, codes[v], _mm512_loadu_si512(xs + v * 32));
      acc = _mm512_fmadd_ps(scales_of<kBits>(m, r, s), g, acc);
    }
    y[r - r0] = finish(m, r, acc, a.group_sums.data());
  }
}

// Several tokens against a panel of widened rows ([rows][supers][V][32] bf16 codes): NR rows by NT
// tokens, the same per-(row, token) sequence as rows_one_token. Generic form for the edges.
template <int kBits, int NR, int NT>
KEEL_MLX_TARGET void panel_tile(const Rows& m, const uint16_t* const* w, int64_t row, const MlxBf16Activations& a,
                                int64_t t, float* y, int64_t y_stride) {
  constexpr int V = kVectors<kBits>;
  __m512 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int u = 0; u < NT; ++u) acc[r][u] = _mm512_setzero_ps();
  for (int64_t s = 0; s < m.supers; ++s) {
    __m512 g[NR][NT];
    for (int r = 0; r < NR; ++r)
      for (int u = 0; u < NT; ++u) g[r][u] = _mm512_setzero_ps();
    for (int v = 0; v < V; ++v) {
      const int64_t off = (s * V + v) * 32;
      __m512i xv[NT];
      for (int u = 0; u < NT; ++u) xv[u] = _mm512_loadu_si512(a.x.data() + (t + u) * a.x_stride + off);
      for (int r = 0; r < NR; ++r) {
        const __m512i wv = _mm512_loadu_si512(w[r] + off);
        for (int u = 0; u < NT; ++u) g[r][u] = dp(g[r][u], wv, xv[u]);
      }
    }
    for (int r = 0; r < NR; ++r) {
      const __m512 sc = scales_of<kBits>(m, row + r, s);
      for (int u = 0; u < NT; ++u) acc[r][u] = _mm512_fmadd_ps(sc, g[r][u], acc[r][u]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int u = 0; u < NT; ++u)
      y[u * y_stride + r] = finish(m, row + r, acc[r][u], a.group_sums.data() + (t + u) * a.sums_stride);
}

// The hot 4x4 tile: its 16 partial sums in named variables (GCC keeps an array of vectors in
// memory across iterations); the 16 running sums, touched once a superblock, may live in memory.

#define KEEL_MLX_TILE44(BITS)                                                                                   \
  template <>                                                                                                   \
  KEEL_MLX_TARGET void panel_tile<BITS, 4, 4>(const Rows& m, const uint16_t* const* w, int64_t row,              \
                                              const MlxBf16Activations& a, int64_t t, float* y, int64_t y_stride) { \
    constexpr int V = kVectors<BITS>;                                                                           \
    __m512 acc[4][4];                                                                                           \
    for (auto& ra : acc)                                                                                        \
      for (auto& v : ra) v = _mm512_setzero_ps();                                                               \
    const uint16_t *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];                                              \
    const uint16_t* x0 = a.x.data() + t * a.x_stride;                                                           \
    const uint16_t *x1 = x0 + a.x_stride, *x2 = x1 + a.x_stride, *x3 = x2 + a.x_stride;                         \
    for (int64_t s = 0; s < m.supers; ++s) {                                                                    \
      __m512 g00 = _mm512_setzero_ps(), g01 = g00, g02 = g00, g03 = g00, g10 = g00, g11 = g00, g12 = g00;       \
      __m512 g13 = g00, g20 = g00, g21 = g00, g22 = g00, g23 = g00, g30 = g00, g31 = g00, g32 = g00, g33 = g00; \
      for (int v = 0; v < V; ++v) {                                                                             \
        const int64_t off = (s * V + v) * 32;                                                                   \
        const __m512i v0 = _mm512_loadu_si512(x0 + off), v1 = _mm512_loadu_si512(x1 + off);                    \
        const __m512i v2 = _mm512_loadu_si512(x2 + off), v3 = _mm512_loadu_si512(x3 + off);                    \
        __m512i wv = _mm512_loadu_si512(w0 + off);                                                              \
        g00 = dp(g00, wv, v0), g01 = dp(g01, wv, v1), g02 = dp(g02, wv, v2), g03 = dp(g03, wv, v3);             \
        wv = _mm512_loadu_si512(w1 + off);                                                                      \
        g10 = dp(g10, wv, v0), g11 = dp(g11, wv, v1), g12 = dp(g12, wv, v2), g13 = dp(g13, wv, v3);             \
        wv = _mm512_loadu_si512(w2 + off);                                                                      \
        g20 = dp(g20, wv, v0), g21 = dp(g21, wv, v1), g22 = dp(g22, wv, v2), g23 = dp(g23, wv, v3);             \
        wv = _mm512_loadu_si512(w3 + off);                                                                      \
        g30 = dp(g30, wv, v0), g31 = dp(g31, wv, v1), g32 = dp(g32, wv, v2), g33 = dp(g33, wv, v3);             \
      }                                                                                                         \
      const __m512 g[4][4] = {{g00, g01, g02, g03}, {g10, g11, g12, g13}, {g20, g21, g22, g23}, {g30, g31, g32, g33}}; \
      for (int r = 0; r < 4; ++r) {                                                                             \
        const __m512 sc = scales_of<BITS>(m, row + r, s);                                                       \
        for (int u = 0; u < 4; ++u) acc[r][u] = _mm512_fmadd_ps(sc, g[r][u], acc[r][u]);                        \
      }                                                                                                         \
    }                                                                                                           \
    for (int r = 0; r < 4; ++r)                                                                                 \
      for (int u = 0; u < 4; ++u)                                                                               \
        y[u * y_stride + r] = finish(m, row + r, acc[r][u], a.group_sums.data() + (t + u) * a.sums_stride);     \
  }
KEEL_MLX_TILE44(4)
KEEL_MLX_TILE44(8)
#undef KEEL_MLX_TILE44

// Several tokens: widen the task's rows once into a panel, then walk token blocks outermost so a
// block's activations stay in L1 while the panel (rows x cols x 2 bytes, in L2) passes by.
template <int kBits>
KEEL_MLX_TARGET void rows_many_tokens(const Rows& m, const MlxBf16Activations& a, int64_t n_tokens, int64_t r0,
                                      int64_t r1, float* y, int64_t y_stride) {
  constexpr int V = kVectors<kBits>;
  const int64_t row_codes = m.supers * V * 32;
  thread_local std::vector<uint16_t> panel;
  panel.resize(static_cast<size_t>((r1 - r0) * row_codes));
  for (int64_t r = r0; r < r1; ++r) {
    uint16_t* out = panel.data() + (r - r0) * row_codes;
    for (int64_t s = 0; s < m.supers; ++s) {
      __m512i codes[V];
      widen<kBits>(m, r, s, codes);
      for (int v = 0; v < V; ++v) _mm512_storeu_si512(out + (s * V + v) * 32, codes[v]);
    }
  }
  auto rows_at = [&](int64_t r, int k, const uint16_t** w) {
    for (int i = 0; i < k; ++i) w[i] = panel.data() + (r - r0 + i) * row_codes;
  };
  int64_t t = 0;
  for (; t + 4 <= n_tokens; t += 4) {
    int64_t r = r0;
    const uint16_t* w[4];
    for (; r + 4 <= r1; r += 4) {
      rows_at(r, 4, w);
      panel_tile<kBits, 4, 4>(m, w, r, a, t, y + t * y_stride + (r - r0), y_stride);
    }
    for (; r < r1; ++r) {
      rows_at(r, 1, w);
      panel_tile<kBits, 1, 4>(m, w, r, a, t, y + t * y_stride + (r - r0), y_stride);
    }
  }
  for (; t < n_tokens; ++t) {
    int64_t r = r0;
    const uint16_t* w[4];
    for (; r + 4 <= r1; r += 4) {
      rows_at(r, 4, w);
      panel_tile<kBits, 4, 1>(m, w, r, a, t, y + t * y_stride + (r - r0), y_stride);
    }
    for (; r < r1; ++r) {
      rows_at(r, 1, w);
      panel_tile<kBits, 1, 1>(m, w, r, a, t, y + t * y_stride + (r - r0), y_stride);
    }
  }
}

template <int kBits>
KEEL_MLX_TARGET void prepare(const MlxRows& w, const float* x, int64_t t0, int64_t t1, MlxBf16Activations& a) {
  constexpr int V = kVectors<kBits>;
  const int64_t cols = w.cols, groups = cols / w.group_size;
  const int64_t supers = (cols * kBits / 8 + kSuperBytes - 1) / kSuperBytes;
  thread_local std::vector<uint16_t> rounded;
  rounded.assign(static_cast<size_t>(supers * kSuperElems<kBits>), 0);
  for (int64_t t = t0; t < t1; ++t) {
    const float* xt = x + t * cols;
    int64_t c = 0;
    for (; c + 16 <= cols; c += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(rounded.data() + c),
                          reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_loadu_ps(xt + c))));
    for (; c < cols; ++c) rounded[static_cast<size_t>(c)] = float_to_bf16(xt[c]);
    // Group sums of the rounded values, 16 lanes then one reduction (groups are multiples of 32).
    float* sums = a.group_sums.data() + t * a.sums_stride;
    for (int64_t g = 0; g < groups; ++g) {
      __m512 s = _mm512_setzero_ps();
      for (int64_t k = g * w.group_size; k < (g + 1) * w.group_size; k += 16) {
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rounded.data() + k));
        s = _mm512_add_ps(s, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
      }
      sums[g] = _mm512_reduce_add_ps(s);
    }
    uint16_t* out = a.x.data() + t * a.x_stride;
    for (int64_t s = 0; s < supers; ++s) {
      const uint16_t* in = rounded.data() + s * kSuperElems<kBits>;
      uint16_t* o = out + s * V * 32;
      for (int i = 0; i < V * 32; ++i) o[i] = in[kElementOf<kBits>[static_cast<size_t>(i)]];
    }
  }
}

}  // namespace

bool mlx_bf16_supported(const MlxRows& w) {
  static const bool cpu = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vbmi");
  const bool group_ok = w.group_size == 32 || w.group_size == 64 || w.group_size == 128;
  return cpu && avx512_kernels_allowed() && (w.bits == 4 || w.bits == 8) && group_ok && w.cols % w.group_size == 0;
}

void size_mlx_bf16_activations(const MlxRows& w, int64_t n_tokens, MlxBf16Activations& a) {
  const int64_t super_elems = w.bits == 4 ? 256 : 128;
  const int64_t supers = (w.cols * w.bits / 8 + kSuperBytes - 1) / kSuperBytes;
  a.x_stride = supers * super_elems;
  a.sums_stride = (w.cols / w.group_size + 15) / 16 * 16;
  a.x.resize(static_cast<size_t>(n_tokens * a.x_stride));
  a.group_sums.assign(static_cast<size_t>(n_tokens * a.sums_stride), 0.0f);
}

void prepare_mlx_bf16_activations(const MlxRows& w, const float* x, int64_t t0, int64_t t1, MlxBf16Activations& a) {
  if (w.bits == 4) prepare<4>(w, x, t0, t1, a);
  else prepare<8>(w, x, t0, t1, a);
}

void gemm_mlx_bf16(const MlxRows& w, const MlxBf16Activations& a, int64_t n_tokens, int64_t r0, int64_t r1, float* y,
                   int64_t y_stride) {
  if (w.bits == 4) {
    const Rows m = rows_of<4>(w);
    if (n_tokens == 1) rows_one_token<4>(m, a, r0, r1, y);
    else rows_many_tokens<4>(m, a, n_tokens, r0, r1, y, y_stride);
  } else {
    const Rows m = rows_of<8>(w);
    if (n_tokens == 1) rows_one_token<8>(m, a, r0, r1, y);
    else rows_many_tokens<8>(m, a, n_tokens, r0, r1, y, y_stride);
  }
}

}  // namespace keel::ops

#pragma GCC diagnostic pop

#else  // not x86-64: never selected

namespace keel::ops {
bool mlx_bf16_supported(const MlxRows&) { return false; }
void size_mlx_bf16_activations(const MlxRows&, int64_t, MlxBf16Activations&) {}
void prepare_mlx_bf16_activations(const MlxRows&, const float*, int64_t, int64_t, MlxBf16Activations&) {}
void gemm_mlx_bf16(const MlxRows&, const MlxBf16Activations&, int64_t, int64_t, int64_t, float*, int64_t) {}
}  // namespace keel::ops

#endif
