// Highway re-includes this file once per SIMD target; everything between HWY_BEFORE_NAMESPACE and
// HWY_AFTER_NAMESPACE is compiled for each, and the HWY_ONCE part dispatches at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "keel/ops/int16_dot.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

#include "keel/ops/int16_dot.h"
#include "keel/ops/prefetch.h"
#include "keel/util/error.h"

HWY_BEFORE_NAMESPACE();
namespace keel::ops {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// At most 16 int16 lanes: a Q6_K unit (16 codes) is then whole vectors on every target. AVX2 and
// AVX-512 run 16 (VPMADDWD on 256 bits), SSE4 and NEON 8, the scalar target 1.
using D16 = hn::CappedTag<int16_t, 16>;
using D32 = hn::Repartition<int32_t, D16>;
using DF = hn::Rebind<float, D32>;
using DU8 = hn::Rebind<uint8_t, D16>;
using DI8 = hn::Rebind<int8_t, D16>;
using V16 = hn::Vec<D16>;

// The code lambdas run once per vector in the innermost loop: inlined even at -O2 (the sanitized
// test build), where GCC would otherwise call them.
// The loops over a row's kNT tokens are unrolled even at -O2, so each token's accumulators stay
// in registers (the arrays would otherwise live on the stack).
#define KEEL_UNROLL_TOKENS _Pragma("GCC unroll 4")
#ifndef KEEL_INLINE_LAMBDA
#define KEEL_INLINE_LAMBDA __attribute__((always_inline))
#endif

HWY_INLINE V16 bytes_u(const uint8_t* p) { return hn::PromoteTo(D16(), hn::LoadU(DU8(), p)); }
HWY_INLINE V16 bytes_i(const uint8_t* p) { return hn::PromoteTo(D16(), hn::LoadU(DI8(), reinterpret_cast<const int8_t*>(p))); }

// An f16 scale, widened by the target's own conversion (F16C on AVX2 and up): exact, as f16_to_float.
HWY_INLINE float f16_at(const uint8_t* p) {
  const hn::CappedTag<float, 1> d1;
  const hn::Rebind<hwy::float16_t, decltype(d1)> dh1;
  return hn::GetLane(hn::PromoteTo(d1, hn::LoadU(dh1, reinterpret_cast<const hwy::float16_t*>(p))));
}

// The int32 lanes of a unit's products, and so the float accumulators of a (row, token): 8 on
// AVX2 and AVX-512 (D16 is capped at 256 bits), 4 on SSE4 and NEON.
constexpr int kLanes = static_cast<int>(hn::MaxLanes(DF()));

// The sum of an accumulator's lanes as a pairwise tree, ((l0 + l1) + (l2 + l3)) + ..., in an order
// fixed here so that the token tiles, which keep lane k of every token in a vector of its own, add
// in the same one. On x86 in registers (a + b and b + a are the same bits, so each shuffle step
// leaves the tree's partial sums in lanes 0, 2, 4, ...); elsewhere through memory.
HWY_INLINE float lane_tree_sum(hn::Vec<DF> v) {
#if HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
  static_assert(kLanes == 4 || kLanes == 8);
  v = hn::Add(v, hn::Shuffle2301(v));  // l0 + l1, l2 + l3, ...
  v = hn::Add(v, hn::Shuffle1032(v));  // (l0 + l1) + (l2 + l3), ...
  if constexpr (kLanes == 8) v = hn::Add(v, hn::SwapAdjacentBlocks(v));
  return hn::GetLane(v);
#else
  alignas(64) float l[kLanes];
  hn::Store(v, DF(), l);
  for (int width = kLanes; width > 1; width /= 2)
    for (int i = 0; i < width / 2; ++i) l[i] = l[2 * i] + l[2 * i + 1];
  return l[0];
#endif
}

// One row against kNT tokens: each unit's code vectors are made once and multiplied with every
// token's activations. Every (row, token) sum runs the same operations in the same order.
template <int kNT>
struct RowTokens {
  const int16_t* xq[kNT];     // the tokens' quantized activations, at the row's first element
  const float* xscale[kNT];   // per block of 32
  const float* xsum[kNT];     // per block of 32
  hn::Vec<DF> acc[kNT];
  float offsets[kNT];

  RowTokens(const I16Activations& a, int64_t t0) {
    const int64_t blocks = a.cols / 32;
    KEEL_UNROLL_TOKENS
    for (int t = 0; t < kNT; ++t) {
      xq[t] = a.q.data() + (t0 + t) * a.cols;
      xscale[t] = a.scale.data() + (t0 + t) * blocks;
      xsum[t] = a.sum.data() + (t0 + t) * blocks;
      acc[t] = hn::Zero(DF());
      offsets[t] = 0.0f;
    }
  }

  // The unit of `n` codes starting at element `first` of the row (n a multiple of the lane count,
  // inside one block of 32): codes(e) gives the code vector of the unit's elements e .. e + L.
  template <class Codes>
  HWY_INLINE void unit(int64_t first, int n, float scale, const Codes& codes) {
    const D16 d16;
    const D32 d32;
    const int L = static_cast<int>(hn::Lanes(d16));
    hn::Vec<D32> s0[kNT], s1[kNT];
    KEEL_UNROLL_TOKENS
    for (int t = 0; t < kNT; ++t) s0[t] = s1[t] = hn::Zero(d32);
    for (int e = 0; e < n; e += L) {
      const V16 c = codes(e);
      KEEL_UNROLL_TOKENS
      for (int t = 0; t < kNT; ++t)
        s0[t] = hn::ReorderWidenMulAccumulate(d32, c, hn::LoadU(d16, xq[t] + first + e), s0[t], s1[t]);
    }
    const int64_t block = first / 32;
    KEEL_UNROLL_TOKENS
    for (int t = 0; t < kNT; ++t)
      acc[t] = hn::MulAdd(hn::Set(DF(), scale * xscale[t][block]), hn::ConvertTo(DF(), hn::Add(s0[t], s1[t])), acc[t]);
  }

  // The c * sum(x) term of a unit of 32 (c = -dmin * m for Q4_K/Q5_K, an MLX group's bias).
  HWY_INLINE void offset_term(int64_t first, float c) {
    KEEL_UNROLL_TOKENS
    for (int t = 0; t < kNT; ++t) offsets[t] += c * xsum[t][first / 32];
  }

  HWY_INLINE void store(float* y, int64_t y_stride) {
    KEEL_UNROLL_TOKENS
    for (int t = 0; t < kNT; ++t) y[t * y_stride] = lane_tree_sum(acc[t]) + offsets[t];
  }
};

// ---- The formats: Block(p, first, row) runs the units of the block at p (elements first ..).

struct Q8_0K {
  static constexpr int kElems = 32, kBytes = 34;
  template <class Row>
  HWY_INLINE static void Block(const uint8_t* p, int64_t first, Row& row) {
    row.unit(first, 32, f16_at(p), [&](int e) KEEL_INLINE_LAMBDA { return bytes_i(p + 2 + e); });
  }
};

// Q4_0: element j < 16 is the low nibble of qs[j], element j + 16 its high nibble.
struct Q4_0K {
  static constexpr int kElems = 32, kBytes = 18;
  template <class Row>
  HWY_INLINE static void Block(const uint8_t* p, int64_t first, Row& row) {
    const D16 d16;
    row.unit(first, 32, f16_at(p), [&](int e) KEEL_INLINE_LAMBDA {
      const V16 b = bytes_u(p + 2 + (e & 15));
      return hn::Sub(e < 16 ? hn::And(b, hn::Set(d16, 15)) : hn::ShiftRight<4>(b), hn::Set(d16, 8));
    });
  }
};

// Q5_0: as Q4_0 with bit j of the u32 qh as bit 4 of element j, and 16 subtracted. Lane i of the
// vector at element e takes bit e + i: the 16 bits from e on are set in every lane, and lane i
// keeps bit i of them (a per-lane mask).
alignas(32) constexpr uint16_t kLaneBits[16] = {1u << 0, 1u << 1, 1u << 2, 1u << 3, 1u << 4, 1u << 5,
                                               1u << 6, 1u << 7, 1u << 8, 1u << 9, 1u << 10, 1u << 11,
                                               1u << 12, 1u << 13, 1u << 14, 1u << 15};  // 1 << lane

struct Q5_0K {
  static constexpr int kElems = 32, kBytes = 22;
  template <class Row>
  HWY_INLINE static void Block(const uint8_t* p, int64_t first, Row& row) {
    const D16 d16;
    const hn::RebindToUnsigned<D16> du16;
    uint32_t qh;
    std::memcpy(&qh, p + 2, 4);
    const auto lane_bit = hn::LoadU(du16, kLaneBits);
    row.unit(first, 32, f16_at(p), [&](int e) KEEL_INLINE_LAMBDA {
      const V16 b = bytes_u(p + 6 + (e & 15));
      const V16 low = e < 16 ? hn::And(b, hn::Set(d16, 15)) : hn::ShiftRight<4>(b);
      const auto bits = hn::And(hn::Set(du16, static_cast<uint16_t>(qh >> e)), lane_bit);
      const V16 high = hn::IfThenElseZero(hn::RebindMask(d16, hn::Ne(bits, hn::Zero(du16))), hn::Set(d16, 16));
      return hn::Sub(hn::Or(low, high), hn::Set(d16, 16));
    });
  }
};

// Q4_K, Q5_K: sub-block j (32 elements) is the low (j even) or high (j odd) nibbles of
// qs[32 (j / 2) ..]; Q5_K's bit 4 of element l is bit j of qh[l].
template <bool kFive>
struct QK45 {
  static constexpr int kElems = 256, kBytes = kFive ? 176 : 144;
  template <class Row>
  HWY_INLINE static void Block(const uint8_t* p, int64_t first, Row& row) {
    const D16 d16;
    const float d = f16_at(p), dmin = f16_at(p + 2);
    const uint8_t* qh = p + 16;
    const uint8_t* qs = p + (kFive ? 48 : 16);
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      ggml_k4_scale_min(j, p + 4, sc, m);
      const uint8_t* q = qs + 32 * (j / 2);
      const bool high = j % 2 != 0;
      row.unit(first + 32 * j, 32, d * static_cast<float>(sc), [&](int e) KEEL_INLINE_LAMBDA {
        const V16 b = bytes_u(q + e);
        V16 code = high ? hn::ShiftRight<4>(b) : hn::And(b, hn::Set(d16, 15));
        if constexpr (kFive)
          code = hn::Or(code, hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(bytes_u(qh + e), j), hn::Set(d16, 1))));
        return code;
      });
      row.offset_term(first + 32 * j, -(dmin * static_cast<float>(m)));
    }
  }
};

// Q6_K: sub-block (n, k, h) of 16 elements starts at 128 n + 32 k + 16 h; its low four bits are
// the low (k < 2) or high nibbles of ql[64 n + 32 (k % 2) + 16 h ..], its top two bits (2 k) of
// qh[32 n + 16 h ..], its scale sc[8 n + 2 k + h]; code = bits - 32. The two sub-blocks of each
// 32 elements (h = 0, 1) form one unit, their codes multiplied by their int8 scales first:
// |(q - 32) * sc| <= 4096 fits int16, and a pair of products 2^28 fits int32.
struct Q6_KK {
  static constexpr int kElems = 256, kBytes = 210;
  template <class Row>
  HWY_INLINE static void Block(const uint8_t* p, int64_t first, Row& row) {
    const D16 d16;
    const float d = f16_at(p + 208);
    const int8_t* sc = reinterpret_cast<const int8_t*>(p + 192);
    for (int n = 0; n < 2; ++n)
      for (int k = 0; k < 4; ++k) {
        const uint8_t* ql = p + 64 * n + 32 * (k % 2);
        const uint8_t* qh = p + 128 + 32 * n;
        const int shift = 2 * k;
        row.unit(first + 128 * n + 32 * k, 32, d, [&](int e) KEEL_INLINE_LAMBDA {
          const V16 l = bytes_u(ql + e);
          const V16 low = k < 2 ? hn::And(l, hn::Set(d16, 15)) : hn::ShiftRight<4>(l);
          const V16 top = hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(bytes_u(qh + e), shift), hn::Set(d16, 3)));
          const V16 code = hn::Sub(hn::Or(low, top), hn::Set(d16, 32));
          // The vector lies in one sub-block (at most 16 lanes): h = e / 16.
          return hn::Mul(code, hn::Set(d16, static_cast<int16_t>(sc[8 * n + 2 * k + e / 16])));
        });
      }
  }
};

// MXFP4 (GGUF): element j < 16 is the low nibble of qs[j], element j + 16 its high nibble. A
// code's e2m1 value doubled is a small integer (kGgmlTwiceE2m1: magnitudes 0 1 2 3 4 6 8 12,
// sign bit 3), formed here by arithmetic (no byte table is portable to every lane count), and the
// block's scale is 2^(e - 128).
struct Mxfp4K {
  static constexpr int kElems = 32, kBytes = 17;
  template <class Row>
  HWY_INLINE static void Block(const uint8_t* p, int64_t first, Row& row) {
    const D16 d16;
    row.unit(first, 32, std::bit_cast<float>(ggml_e8m0_half_bits(p[0])), [&](int e) KEEL_INLINE_LAMBDA {
      const V16 b = bytes_u(p + 1 + (e & 15));
      const V16 code = e < 16 ? hn::And(b, hn::Set(d16, 15)) : hn::ShiftRight<4>(b);
      const V16 m = hn::And(code, hn::Set(d16, 7));
      // m, then 4 5 6 7 -> 4 6 8 10, then 7 -> 12.
      V16 v = hn::Add(m, hn::Max(hn::Sub(m, hn::Set(d16, 4)), hn::Zero(d16)));
      v = hn::Add(v, hn::IfThenElseZero(hn::Eq(m, hn::Set(d16, 7)), hn::Set(d16, 2)));
      return hn::IfThenElse(hn::Ne(hn::And(code, hn::Set(d16, 8)), hn::Zero(d16)), hn::Neg(v), v);
    });
  }
};

// MLX rows: unit b is elements 32b .. 32b + 32 of a row, inside group 32b / group_size; value =
// scale * q + bias. 4 bits: the unit's 16 bytes hold element 2k in the low nibble of byte k and
// 2k + 1 in the high one, against activations stored evens first (pairs_split). 8 bits: byte j.
template <int kBits>
struct MlxRow {
  const uint8_t* bytes;
  const float* scales;
  const float* biases;
  int64_t cols, group_size;

  MlxRow(const MlxRows& m, int64_t r)
      : bytes(reinterpret_cast<const uint8_t*>(m.words) + r * (m.cols * kBits / 8)),
        scales(m.scales + r * (m.cols / m.group_size)),
        biases(m.biases + r * (m.cols / m.group_size)),
        cols(m.cols),
        group_size(m.group_size) {}

  void prefetch() const {
    prefetch_ahead(bytes, cols * kBits / 8);
    prefetch_ahead(scales, cols / group_size * 4);
    prefetch_ahead(biases, cols / group_size * 4);
  }

  template <class Row>
  HWY_INLINE void run(Row& row) const {
    const D16 d16;
    // The group is counted, not divided out: an integer division per unit cost as much as the
    // unit's products.
    const int64_t units_per_group = group_size / 32;
    int64_t g = 0, left_in_group = units_per_group;
    for (int64_t b = 0; b < cols / 32; ++b) {
      const uint8_t* p = bytes + b * (32 * kBits / 8);
      row.unit(32 * b, 32, scales[g], [&](int e) KEEL_INLINE_LAMBDA {
        if constexpr (kBits == 8) return bytes_u(p + e);
        const V16 v = bytes_u(p + (e & 15));
        return e < 16 ? hn::And(v, hn::Set(d16, 15)) : hn::ShiftRight<4>(v);
      });
      row.offset_term(32 * b, biases[g]);
      if (--left_in_group == 0) ++g, left_in_group = units_per_group;
    }
  }
};

// A row of ggml blocks in format F.
template <class F>
struct GgmlRow {
  const uint8_t* p;
  int64_t blocks;

  GgmlRow(const GgmlRows& w, int64_t r) : p(w.data + r * w.row_bytes), blocks(w.cols / F::kElems) {}

  void prefetch() const { prefetch_ahead(p, blocks * F::kBytes); }

  template <class Row>
  HWY_INLINE void run(Row& row) const {
    for (int64_t b = 0; b < blocks; ++b) F::Block(p + b * F::kBytes, b * F::kElems, row);
  }
};

// ---- Token tiles (x86 only: VPMADDWD multiplies adjacent pairs, so lane k of a unit's products is
// code pairs k, k + kLanes, ... of the unit on every x86 target; NEON's widening multiply pairs
// other lanes, and the scalar target has one).
#undef KEEL_TOKEN_TILES  // this file is compiled once per target
#if HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
#define KEEL_TOKEN_TILES 1
#else
#define KEEL_TOKEN_TILES 0
#endif
#if KEEL_TOKEN_TILES

// A row decoded once for the token tiles: the same calls as RowTokens receives, recorded. Every
// format calls offset_term for all of its units or for none.
struct DecodedRow {
  int16_t* codes;  // [cols]: unit u's codes at 32 u, in the activations' order
  float* scale;    // [cols / 32]
  float* offset;   // [cols / 32]
  bool has_offsets = false;

  template <class Codes>
  HWY_INLINE void unit(int64_t first, int n, float s, const Codes& codes_of) {
    const int L = static_cast<int>(hn::Lanes(D16()));
    for (int e = 0; e < n; e += L) hn::StoreU(codes_of(e), D16(), codes + first + e);
    scale[first / 32] = s;
  }
  HWY_INLINE void offset_term(int64_t first, float c) {
    offset[first / 32] = c;
    has_offsets = true;
  }
};

// The tokens of one tile side by side: as many as an int32 vector holds, at most kI16TileTokens.
using DT32 = hn::CappedTag<int32_t, kI16TileTokens>;
using DT16 = hn::Repartition<int16_t, DT32>;
using DTF = hn::Rebind<float, DT32>;

// One (row, tile)'s sums between column chunks (kLanes accumulators, then the offsets), and the
// units of 32 columns per chunk (TiledProducts).
constexpr int64_t kTileSums = (kLanes + 1) * kI16TileTokens, kTileChunkUnits = 8;

// Units [u0, u1) of one decoded row against the tile of tokens t .. t + Lanes(DTF) (t a multiple of
// that count), continuing `sums`: per unit, accumulator k takes the float of code pairs k,
// k + kLanes, ... against the same pairs of each token, exactly as lane k of RowTokens's
// accumulator, and the units come in the same order.
HWY_INLINE void TileUnits(const DecodedRow& w, const I16Activations& a, int64_t t, int64_t u0, int64_t u1,
                          float* sums) {
  const DT32 dt;
  const DT16 dt16;
  const DTF df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  constexpr int kSteps = 16 / kLanes;  // vectors of D16 per unit of 32
  const int64_t units = a.cols / 32;
  const int64_t tile = t / kI16TileTokens, lane0 = t % kI16TileTokens;
  const int16_t* xq = a.tiled_q.data() + tile * (a.cols / 2) * kI16TileTokens * 2 + lane0 * 2;
  const float* xs = a.tiled_scale.data() + tile * units * kI16TileTokens + lane0;
  const float* xsum = a.tiled_sum.data() + tile * units * kI16TileTokens + lane0;
  hn::Vec<DTF> acc[kLanes];
  for (int k = 0; k < kLanes; ++k) acc[k] = hn::LoadU(df, sums + k * L);
  auto offsets = hn::LoadU(df, sums + kLanes * L);
  for (int64_t u = u0; u < u1; ++u) {
    const auto scale = hn::Mul(hn::Set(df, w.scale[u]), hn::LoadU(df, xs + u * kI16TileTokens));
    const int16_t* codes = w.codes + 32 * u;
    const int16_t* x = xq + 16 * u * kI16TileTokens * 2;
    for (int k = 0; k < kLanes; ++k) {
      auto dot = hn::Zero(dt), unused = hn::Zero(dt);
      for (int s = 0; s < kSteps; ++s) {
        const int pair = s * kLanes + k;
        int32_t two_codes;
        std::memcpy(&two_codes, codes + 2 * pair, 4);
        dot = hn::ReorderWidenMulAccumulate(dt, hn::BitCast(dt16, hn::Set(dt, two_codes)),
                                            hn::LoadU(dt16, x + pair * kI16TileTokens * 2), dot, unused);
      }
      acc[k] = hn::MulAdd(scale, hn::ConvertTo(df, dot), acc[k]);
    }
    if (w.has_offsets)
      offsets = hn::Add(offsets, hn::Mul(hn::Set(df, w.offset[u]), hn::LoadU(df, xsum + u * kI16TileTokens)));
  }
  for (int k = 0; k < kLanes; ++k) hn::StoreU(acc[k], df, sums + k * L);
  hn::StoreU(offsets, df, sums + kLanes * L);
}

// The tile's outputs: the lanes' pairwise tree (as lane_tree_sum), plus the offsets.
HWY_INLINE void TileStore(const float* sums, float* y, int64_t y_stride) {
  const DTF df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  hn::Vec<DTF> acc[kLanes];
  for (int k = 0; k < kLanes; ++k) acc[k] = hn::LoadU(df, sums + k * L);
  for (int width = kLanes; width > 1; width /= 2)
    for (int i = 0; i < width / 2; ++i) acc[i] = hn::Add(acc[2 * i], acc[2 * i + 1]);
  alignas(64) float out[kI16TileTokens];
  hn::Store(hn::Add(acc[0], hn::LoadU(df, sums + kLanes * L)), df, out);
  for (int64_t i = 0; i < L; ++i) y[i * y_stride] = out[i];
}

// Whole tiles of tokens from token 0 against every row of [r0, r1); returns the first token not
// done. The rows are decoded once; then, per tile, the columns go in chunks of kTileChunkUnits units
// with every row taking each chunk in turn, so the tile's activations for the chunk (4 KiB) stay in
// L1 while the rows stream past (a tile over all of a 4864-wide row is 76 KiB, over L1).
template <class RowOf, class Rows>
int64_t TiledProducts(const Rows& w, const I16Activations& a, int64_t n_tokens, int64_t r0, int64_t r1, float* y,
                      int64_t y_stride) {
  const auto tile_tokens = static_cast<int64_t>(hn::Lanes(DTF()));
  if (a.tiled_q.empty() || n_tokens < tile_tokens) return 0;
  const int64_t rows = r1 - r0, units = a.cols / 32;
  thread_local std::vector<int16_t> codes;
  thread_local std::vector<float> scales, offsets, sums;
  codes.resize(static_cast<size_t>(rows * a.cols));
  scales.resize(static_cast<size_t>(rows * units));
  offsets.resize(scales.size());
  sums.resize(static_cast<size_t>(rows * kTileSums));  // [rows][kTileSums]
  auto decoded = [&](int64_t r, bool has_offsets) {
    return DecodedRow{codes.data() + r * a.cols, scales.data() + r * units, offsets.data() + r * units, has_offsets};
  };
  bool has_offsets = false;
  for (int64_t r = 0; r < rows; ++r) {
    const RowOf one(w, r0 + r);
    one.prefetch();
    DecodedRow row = decoded(r, false);
    one.run(row);
    has_offsets = row.has_offsets;  // the same for every row of a format
  }
  const int64_t end = n_tokens / tile_tokens * tile_tokens;
  for (int64_t t = 0; t < end; t += tile_tokens) {
    std::fill(sums.begin(), sums.end(), 0.0f);
    for (int64_t u0 = 0; u0 < units; u0 += kTileChunkUnits)
      for (int64_t r = 0; r < rows; ++r)
        TileUnits(decoded(r, has_offsets), a, t, u0, std::min(units, u0 + kTileChunkUnits), sums.data() + r * kTileSums);
    for (int64_t r = 0; r < rows; ++r) TileStore(sums.data() + r * kTileSums, y + t * y_stride + r, y_stride);
  }
  return end;
}
#endif  // KEEL_TOKEN_TILES

// Every row of [r0, r1) against the tokens no tile took: blocks of kTokenBlock tokens outermost,
// so a block's activations (64 x 4864 x 2 bytes at most, in L2) serve every row of the task; in a
// block, four tokens at a time, then one. The rows ahead are prefetched before each row.
constexpr int64_t kTokenBlock = 64;
template <class RowOf, class Rows>
void Products(const Rows& w, const I16Activations& a, int64_t n_tokens, int64_t r0, int64_t r1, float* y,
              int64_t y_stride) {
  int64_t first = 0;
#if KEEL_TOKEN_TILES
  first = TiledProducts<RowOf>(w, a, n_tokens, r0, r1, y, y_stride);
#endif
  for (int64_t t0 = first; t0 < n_tokens; t0 += kTokenBlock) {
    const int64_t t_end = std::min(n_tokens, t0 + kTokenBlock);
    for (int64_t r = r0; r < r1; ++r) {
      const RowOf one(w, r);
      one.prefetch();
      int64_t t = t0;
      for (; t + 4 <= t_end; t += 4) {
        RowTokens<4> row(a, t);
        one.run(row);
        row.store(y + t * y_stride + (r - r0), y_stride);
      }
      for (; t < t_end; ++t) {
        RowTokens<1> row(a, t);
        one.run(row);
        row.store(y + t * y_stride + (r - r0), y_stride);
      }
    }
  }
}

template <class F>
void Gemm(const GgmlRows& w, const I16Activations& a, int64_t n_tokens, int64_t r0, int64_t r1, float* y,
          int64_t y_stride) {
  Products<GgmlRow<F>>(w, a, n_tokens, r0, r1, y, y_stride);
}

void GemmMlxI16(const MlxRows& m, const I16Activations& a, int64_t n_tokens, int64_t r0, int64_t r1, float* y,
                int64_t y_stride) {
  if (m.bits == 4) Products<MlxRow<4>>(m, a, n_tokens, r0, r1, y, y_stride);
  else Products<MlxRow<8>>(m, a, n_tokens, r0, r1, y, y_stride);
}

void GemmGgmlI16(const GgmlRows& w, const I16Activations& a, int64_t n_tokens, int64_t r0, int64_t r1, float* y,
                 int64_t y_stride) {
  switch (w.format) {
    case WeightFormat::Q8_0: return Gemm<Q8_0K>(w, a, n_tokens, r0, r1, y, y_stride);
    case WeightFormat::Q4_0: return Gemm<Q4_0K>(w, a, n_tokens, r0, r1, y, y_stride);
    case WeightFormat::Q5_0: return Gemm<Q5_0K>(w, a, n_tokens, r0, r1, y, y_stride);
    case WeightFormat::Q4_K: return Gemm<QK45<false>>(w, a, n_tokens, r0, r1, y, y_stride);
    case WeightFormat::Q5_K: return Gemm<QK45<true>>(w, a, n_tokens, r0, r1, y, y_stride);
    case WeightFormat::Q6_K: return Gemm<Q6_KK>(w, a, n_tokens, r0, r1, y, y_stride);
    case WeightFormat::MXFP4_GGUF: return Gemm<Mxfp4K>(w, a, n_tokens, r0, r1, y, y_stride);
    default: break;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace keel::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace keel::ops {

HWY_EXPORT(GemmGgmlI16);
HWY_EXPORT(GemmMlxI16);

bool ggml_i16_supported(WeightFormat f) {
  return f == WeightFormat::Q8_0 || f == WeightFormat::Q4_0 || f == WeightFormat::Q5_0 || f == WeightFormat::Q4_K ||
         f == WeightFormat::Q5_K || f == WeightFormat::Q6_K || f == WeightFormat::MXFP4_GGUF;
}

bool mlx_i16_supported(const MlxRows& w) {
  return (w.bits == 4 || w.bits == 8) && w.group_size >= 32 && w.group_size % 32 == 0 && w.cols % w.group_size == 0;
}

void gemm_ggml_i16(const GgmlRows& w, const I16Activations& a, int64_t n_tokens, int64_t r0, int64_t r1,
                   float* y, int64_t y_stride) {
  if (!ggml_i16_supported(w.format)) throw InternalError(std::string("no int16 kernel for ") + weight_format_name(w.format));
  if (a.pairs_split) throw InternalError("ggml rows take activations in element order");
  HWY_DYNAMIC_DISPATCH(GemmGgmlI16)(w, a, n_tokens, r0, r1, y, y_stride);
}

void gemm_mlx_i16(const MlxRows& w, const I16Activations& a, int64_t n_tokens, int64_t r0, int64_t r1, float* y,
                  int64_t y_stride) {
  if (!mlx_i16_supported(w) || a.pairs_split != (w.bits == 4))
    throw InternalError("gemm_mlx_i16: rows or activations it does not take");
  HWY_DYNAMIC_DISPATCH(GemmMlxI16)(w, a, n_tokens, r0, r1, y, y_stride);
}

}  // namespace keel::ops
#endif
