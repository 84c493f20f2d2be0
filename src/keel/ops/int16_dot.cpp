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
#include <type_traits>
#include <utility>

#include "keel/ops/int16_dot.h"
#include "keel/ops/interleaved_rows.h"
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
using DB = hn::Repartition<uint8_t, D16>;  // as many bytes as D16's vector holds
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

// Four lanes of int32 and of float: a vector of four units' sums and scales (RowTokens).
using D4 = hn::CappedTag<int32_t, 4>;
using DF4 = hn::Rebind<float, D4>;

// sum + the products of int16 lanes 2k and 2k + 1 of a and b, in int32 lane k: VPMADDWD then
// VPADDD, or where kVnni one VPDPWSSD (AVX512_VNNI), the same int32 sums (it does not saturate,
// and no pair reaches 2^31: |activations| <= 32767). Highway 1.0 emits VPDPWSSD only under its
// opt-in AVX3_DL target, whose flags in Debian's 1.0.3 also enable AVX-VNNI: GCC then writes the
// VEX form, which AVX-512 CPUs such as Zen 4 lack. So the AVX3 target writes the EVEX form itself
// and the caller chooses it at run time (kVnniForm: this target can; UseVnni: the CPU can).
#if HWY_TARGET == HWY_AVX3
constexpr bool kVnniForm = true;
#else
constexpr bool kVnniForm = false;
#endif
// sum1 is ReorderWidenMulAccumulate's second sum (untouched on x86).
template <bool kVnni, class D32, class V16>
HWY_INLINE hn::Vec<D32> DotPairs(D32 d32, V16 a, V16 b, hn::Vec<D32> sum, hn::Vec<D32>& sum1) {
#if HWY_TARGET == HWY_AVX3
  if constexpr (kVnni) {
    auto raw = sum.raw;
    asm("vpdpwssd %2, %1, %0" : "+v"(raw) : "v"(a.raw), "v"(b.raw));  // AT&T order: raw += a . b
    return hn::Vec<D32>{raw};
  }
#endif
  return hn::ReorderWidenMulAccumulate(d32, a, b, sum, sum1);
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
// The f16 scales at the start of four blocks kStride bytes apart, widened in one conversion (F16C):
// exact, as f16_at each, and already the vector the row's flush multiplies by (four_at, when the
// row takes them so): 9 instructions for four units where four conversions and a re-gather took 15.
#define KEEL_F16_SCALES4 1
template <int kStride>
HWY_INLINE hn::Vec<DF4> f16_scales4(const uint8_t* p) {
  uint16_t h[4];
  for (int k = 0; k < 4; ++k) std::memcpy(&h[k], p + k * kStride, 2);
  return hn::Vec<DF4>{_mm_cvtph_ps(_mm_setr_epi16(static_cast<short>(h[0]), static_cast<short>(h[1]),
                                                  static_cast<short>(h[2]), static_cast<short>(h[3]), 0, 0, 0, 0))};
}
#endif

// ---- The order of a (row, token)'s float sums, kept by every path, on every target (int16_dot.h):
// kPartials partial sums, unit u adding into partial u % kPartials,
//   P[u % 8] = (P[u % 8] + (w_scale * x_scale) * float(unit sum)) + c * x_sum
// (the second add only for formats with offsets), and the output
//   Q[k] = P[k] + P[k + 4];   y = (Q[0] + Q[2]) + (Q[1] + Q[3]).
// Eight independent partials let one row's units be reduced four at a time, a vector of four unit
// sums (decode), and keep the float chains short.
constexpr int kPartials = 8;

HWY_INLINE float partials_sum(const float* p) {
  const float q0 = p[0] + p[4], q1 = p[1] + p[5], q2 = p[2] + p[6], q3 = p[3] + p[7];
  return (q0 + q2) + (q1 + q3);
}

// ---- The formats: Read(p) gives the header (scales) of the block at p, and Unit(p, header, first,
// j, row) runs unit j of its kUnits units, the block's first element being element `first` of the
// row. A header is read once for the units of its block that run together (GgmlRow::four_at).
// A unit reaches its row as row.unit<kZero>(first, scale, codes): codes(e) gives the vector of
// elements e .. e + L, whose values are those codes minus kZero. The rows take kZero off exactly
// (the row path from the unit's int32 sum, as kZero times the activations' sum; the tiles and the
// scalar target from each code): the same int32 sums either way.

struct Q8_0K {
  static constexpr int kElems = 32, kBytes = 34, kUnits = 1;
  static constexpr bool kF16Scale = true;  // d, an f16 at the block's start
  using Header = float;  // d
  HWY_INLINE static Header Read(const uint8_t* p) { return f16_at(p); }
  template <class Row>
  HWY_INLINE static void Unit(const uint8_t* p, Header d, int64_t first, int, Row& row) {
    row.unit(first, d, [&](int e) KEEL_INLINE_LAMBDA { return bytes_i(p + 2 + e); });
  }
};

// Q4_0: element j < 16 is the low nibble of qs[j], element j + 16 its high nibble; code = nibble - 8
// (the 8 is the unit's zero, taken off its sum: Row::unit<kZero>).
struct Q4_0K {
  static constexpr int kElems = 32, kBytes = 18, kUnits = 1;
  static constexpr bool kF16Scale = true;  // d, an f16 at the block's start
  using Header = float;  // d
  HWY_INLINE static Header Read(const uint8_t* p) { return f16_at(p); }
  template <class Row>
  HWY_INLINE static void Unit(const uint8_t* p, Header d, int64_t first, int, Row& row) {
    const D16 d16;
    row.template unit<8>(first, d, [&](int e) KEEL_INLINE_LAMBDA {
      const V16 b = bytes_u(p + 2 + (e & 15));
      return e < 16 ? hn::And(b, hn::Set(d16, 15)) : hn::ShiftRight<4>(b);
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
  static constexpr int kElems = 32, kBytes = 22, kUnits = 1;
  static constexpr bool kF16Scale = true;  // d, an f16 at the block's start
  using Header = float;  // d
  HWY_INLINE static Header Read(const uint8_t* p) { return f16_at(p); }
  template <class Row>
  HWY_INLINE static void Unit(const uint8_t* p, Header d, int64_t first, int, Row& row) {
    const D16 d16;
    const hn::RebindToUnsigned<D16> du16;
    uint32_t qh;
    std::memcpy(&qh, p + 2, 4);
    const auto lane_bit = hn::LoadU(du16, kLaneBits);
    row.template unit<16>(first, d, [&](int e) KEEL_INLINE_LAMBDA {
      const V16 b = bytes_u(p + 6 + (e & 15));
      const V16 low = e < 16 ? hn::And(b, hn::Set(d16, 15)) : hn::ShiftRight<4>(b);
      const auto bits = hn::And(hn::Set(du16, static_cast<uint16_t>(qh >> e)), lane_bit);
      const V16 high = hn::IfThenElseZero(hn::RebindMask(d16, hn::Ne(bits, hn::Zero(du16))), hn::Set(d16, 16));
      return hn::Or(low, high);
    });
  }
};

// Q4_K, Q5_K: sub-block j (32 elements) is the low (j even) or high (j odd) nibbles of
// qs[32 (j / 2) ..]; Q5_K's bit 4 of element l is bit j of qh[l]. Its weight scale is d * sc_j and
// its offset -(dmin * m_j), both formed for four sub-blocks at once (ReadFour): the 6-bit scales
// and mins of sub-blocks 0-3 or 4-7 are four bytes of one 32-bit word each (ggml_k4_scale_min's
// bits, gathered word-wide), widened and multiplied in one vector. Unpacking them one sub-block
// at a time was most of a unit's scalar work.
template <bool kFive>
struct QK45 {
  static constexpr int kElems = 256, kBytes = kFive ? 176 : 144, kUnits = 8;
  struct Header {
    alignas(16) float scale[8];   // d * sc_j
    alignas(16) float offset[8];  // -(dmin * m_j)
  };
  // Sub-blocks K0 .. K0 + 4 of the header (K0 = 0 or 4).
  template <int K0>
  HWY_INLINE static void ReadInto(const uint8_t* p, Header& h) {
    uint32_t w[3];
    std::memcpy(w, p + 4, 12);
    constexpr uint32_t k6 = 0x3f3f3f3fu, k4 = 0x0f0f0f0fu, k2 = 0x03030303u;
    const uint32_t sc = K0 == 0 ? w[0] & k6 : (w[2] & k4) | (((w[0] >> 6) & k2) << 4);
    const uint32_t m = K0 == 0 ? w[1] & k6 : ((w[2] >> 4) & k4) | (((w[1] >> 6) & k2) << 4);
    const float d = f16_at(p), dmin = f16_at(p + 2);
#if HWY_TARGET != HWY_SCALAR
    const hn::CappedTag<float, 4> df;
    const hn::Rebind<int32_t, decltype(df)> di;
    const hn::Rebind<uint8_t, decltype(df)> du8;
    const hn::CappedTag<uint32_t, 1> dw;
    auto four = [&](uint32_t bytes) { return hn::ConvertTo(df, hn::PromoteTo(di, hn::BitCast(du8, hn::Set(dw, bytes)))); };
    hn::Store(hn::Mul(hn::Set(df, d), four(sc)), df, h.scale + K0);
    hn::Store(hn::Neg(hn::Mul(hn::Set(df, dmin), four(m))), df, h.offset + K0);
#else
    for (int k = 0; k < 4; ++k) {
      h.scale[K0 + k] = d * static_cast<float>((sc >> (8 * k)) & 0xff);
      h.offset[K0 + k] = -(dmin * static_cast<float>((m >> (8 * k)) & 0xff));
    }
#endif
  }
  template <int K0>
  HWY_INLINE static Header ReadFour(const uint8_t* p) {
    Header h;
    ReadInto<K0>(p, h);
    return h;
  }
  HWY_INLINE static Header Read(const uint8_t* p) {
    Header h;
    ReadInto<0>(p, h);
    ReadInto<4>(p, h);
    return h;
  }
  template <class Row>
  HWY_INLINE static void Unit(const uint8_t* p, const Header& h, int64_t first, int j, Row& row) {
    const D16 d16;
    const uint8_t* qh = p + 16;
    const uint8_t* q = p + (kFive ? 48 : 16) + 32 * (j / 2);
    const bool high = j % 2 != 0;
    row.unit(first + 32 * j, h.scale[j], [&](int e) KEEL_INLINE_LAMBDA {
      const V16 b = bytes_u(q + e);
      V16 code = high ? hn::ShiftRight<4>(b) : hn::And(b, hn::Set(d16, 15));
      if constexpr (kFive)
        code = hn::Or(code, hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(bytes_u(qh + e), j), hn::Set(d16, 1))));
      return code;
    });
    row.offset_term(first + 32 * j, h.offset[j]);
  }
};

// Q6_K: sub-block (n, k, h) of 16 elements starts at 128 n + 32 k + 16 h; its low four bits are
// the low (k < 2) or high nibbles of ql[64 n + 32 (k % 2) + 16 h ..], its top two bits (2 k) of
// qh[32 n + 16 h ..], its scale sc[8 n + 2 k + h]; code = bits - 32. The two sub-blocks of each 32
// elements (h = 0, 1) form one unit j = 4 n + k, their codes multiplied by their int8 scales first:
// |(q - 32) * sc| <= 4096, so 32 products with activations of at most 16383 fit int32.
struct Q6_KK {
  static constexpr int kElems = 256, kBytes = 210, kUnits = 8;
  using Header = float;  // d
  HWY_INLINE static Header Read(const uint8_t* p) { return f16_at(p + 208); }
  template <class Row>
  HWY_INLINE static void Unit(const uint8_t* p, Header d, int64_t first, int j, Row& row) {
    const D16 d16;
    const int n = j / 4, k = j % 4;
    const uint8_t* ql = p + 64 * n + 32 * (k % 2);
    const uint8_t* qh = p + 128 + 32 * n;
    const int8_t* sc = reinterpret_cast<const int8_t*>(p + 192) + 8 * n + 2 * k;
    row.unit(first + 32 * j, d, [&](int e) KEEL_INLINE_LAMBDA {
      const V16 l = bytes_u(ql + e);
      const V16 low = k < 2 ? hn::And(l, hn::Set(d16, 15)) : hn::ShiftRight<4>(l);
      // Bits 2k, 2k + 1 of qh moved to bits 4, 5 by one shift (k is a constant once inlined).
      const V16 h = bytes_u(qh + e);
      const V16 moved = k == 0 ? hn::ShiftLeft<4>(h) : k == 1 ? hn::ShiftLeft<2>(h) : k == 2 ? h : hn::ShiftRight<2>(h);
      const V16 top = hn::And(moved, hn::Set(d16, 0x30));
      const V16 code = hn::Sub(hn::Or(low, top), hn::Set(d16, 32));
      // The vector lies in one sub-block (at most 16 lanes): h = e / 16.
      return hn::Mul(code, hn::Set(d16, static_cast<int16_t>(sc[e / 16])));
    });
  }
};

// MXFP4 (GGUF): element j < 16 is the low nibble of qs[j], element j + 16 its high nibble. A
// code's e2m1 value doubled is a small integer (kGgmlTwiceE2m1: magnitudes 0 1 2 3 4 6 8 12,
// sign bit 3), looked up in a 16-byte table (one byte shuffle per vector: Highway's
// TableLookupBytes indexes within each 128-bit block, so any lane count takes the same table);
// the scalar target, whose vectors hold one byte, forms it by arithmetic. The block's scale is
// 2^(e - 128).
struct Mxfp4K {
  static constexpr int kElems = 32, kBytes = 17, kUnits = 1;
  using Header = float;  // the block's scale
  HWY_INLINE static Header Read(const uint8_t* p) { return std::bit_cast<float>(ggml_e8m0_half_bits(p[0])); }
  template <class Row>
  HWY_INLINE static void Unit(const uint8_t* p, Header scale, int64_t first, int, Row& row) {
    const D16 d16;
#if HWY_TARGET != HWY_SCALAR
    const DI8 d8;
    const DU8 du8;
    const hn::Full128<int8_t> table_tag;
    const auto table = hn::LoadU(table_tag, kGgmlTwiceE2m1);
    row.unit(first, scale, [&](int e) KEEL_INLINE_LAMBDA {
      // Nibbles of unsigned bytes: a shift of signed bytes costs a sign fix-up on x86.
      const auto b = hn::LoadU(du8, p + 1 + (e & 15));
      const auto code = e < 16 ? hn::And(b, hn::Set(du8, 15)) : hn::ShiftRight<4>(b);
      return hn::PromoteTo(d16, hn::TableLookupBytes(table, hn::BitCast(d8, code)));
    });
#else
    row.unit(first, scale, [&](int e) KEEL_INLINE_LAMBDA {
      const V16 b = bytes_u(p + 1 + (e & 15));
      const V16 code = e < 16 ? hn::And(b, hn::Set(d16, 15)) : hn::ShiftRight<4>(b);
      const V16 m = hn::And(code, hn::Set(d16, 7));
      // m, then 4 5 6 7 -> 4 6 8 10, then 7 -> 12.
      V16 v = hn::Add(m, hn::Max(hn::Sub(m, hn::Set(d16, 4)), hn::Zero(d16)));
      v = hn::Add(v, hn::IfThenElseZero(hn::Eq(m, hn::Set(d16, 7)), hn::Set(d16, 2)));
      return hn::IfThenElse(hn::Ne(hn::And(code, hn::Set(d16, 8)), hn::Zero(d16)), hn::Neg(v), v);
    });
#endif
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
  int group_shift;  // log2(group_size / 32), or -1 when that is not a power of two

  MlxRow(const MlxRows& m, int64_t r)
      : bytes(reinterpret_cast<const uint8_t*>(m.words) + r * (m.cols * kBits / 8)),
        scales(m.scales + r * (m.cols / m.group_size)),
        biases(m.biases + r * (m.cols / m.group_size)),
        cols(m.cols),
        group_size(m.group_size),
        group_shift(std::has_single_bit(static_cast<uint64_t>(m.group_size / 32))
                        ? std::countr_zero(static_cast<uint64_t>(m.group_size / 32))
                        : -1) {}

  void prefetch() const {
    prefetch_ahead(bytes, cols * kBits / 8);
    prefetch_ahead(scales, cols / group_size * 4);
    prefetch_ahead(biases, cols / group_size * 4);
  }

  int64_t units() const { return cols / 32; }

  // The group by a shift (mlx-lm's groups are powers of two): a division per unit cost as much as
  // the unit's products.
  template <int K0, class Row>
  HWY_INLINE void four_at(int64_t u0, Row& row) const {
    for (int k = 0; k < 4; ++k) unit(u0 + K0 + k, row);
  }

  template <class Row>
  HWY_INLINE void unit(int64_t b, Row& row) const {
    const D16 d16;
    const int64_t g = group_shift >= 0 ? b >> group_shift : b / (group_size / 32);
    const uint8_t* p = bytes + b * (32 * kBits / 8);
    row.unit(32 * b, scales[g], [&](int e) KEEL_INLINE_LAMBDA {
      if constexpr (kBits == 8) return bytes_u(p + e);
      const V16 v = bytes_u(p + (e & 15));
      return e < 16 ? hn::And(v, hn::Set(d16, 15)) : hn::ShiftRight<4>(v);
    });
    row.offset_term(32 * b, biases[g]);
  }
};

// A row of ggml blocks in format F.
template <class F>
struct GgmlRow {
  const uint8_t* p;
  int64_t blocks;

  GgmlRow(const GgmlRows& w, int64_t r) : p(w.data + r * w.row_bytes), blocks(w.cols / F::kElems) {}

  void prefetch() const { prefetch_ahead(p, blocks * F::kBytes); }

  int64_t units() const { return blocks * F::kUnits; }

  template <class Row>
  HWY_INLINE void unit(int64_t u, Row& row) const {
    const int64_t b = u / F::kUnits;
    const uint8_t* block = p + b * F::kBytes;
    F::Unit(block, F::Read(block), b * F::kElems, static_cast<int>(u % F::kUnits), row);
  }

  // Units u0 + K0 .. u0 + K0 + 4, u0 a multiple of 8 (and so of kUnits, 1 or 8).
  template <int K0, class Row>
  HWY_INLINE void four_at(int64_t u0, Row& row) const {
    static_assert(8 % F::kUnits == 0 && (F::kUnits == 1 || K0 + 4 <= F::kUnits));
    if constexpr (F::kUnits == 1) {
#ifdef KEEL_F16_SCALES4
      if constexpr (requires { F::kF16Scale; } && requires(hn::Vec<DF4> v) { row.four_scales(v); }) {
        // The four blocks' scales in one conversion; the units' own are then not read.
        const uint8_t* first_block = p + (u0 + K0) * F::kBytes;
        row.four_scales(f16_scales4<F::kBytes>(first_block));
        [&]<int... K>(std::integer_sequence<int, K...>) KEEL_INLINE_LAMBDA {
          (F::Unit(first_block + K * F::kBytes, 0.0f, (u0 + K0 + K) * F::kElems, 0, row), ...);
        }(std::make_integer_sequence<int, 4>());
        return;
      }
#endif
      [&]<int... K>(std::integer_sequence<int, K...>) KEEL_INLINE_LAMBDA {
        (F::Unit(p + (u0 + K0 + K) * F::kBytes, F::Read(p + (u0 + K0 + K) * F::kBytes), (u0 + K0 + K) * F::kElems, 0, row), ...);
      }(std::make_integer_sequence<int, 4>());
    } else {
      const int64_t b = u0 / F::kUnits;
      const uint8_t* block = p + b * F::kBytes;
      typename F::Header h;
      if constexpr (requires { F::template ReadFour<K0>(block); }) h = F::template ReadFour<K0>(block);
      else h = F::Read(block);
      [&]<int... K>(std::integer_sequence<int, K...>) KEEL_INLINE_LAMBDA {
        (F::Unit(block, h, b * F::kElems, K0 + K, row), ...);
      }(std::make_integer_sequence<int, 4>());
    }
  }
};

// A row of interleaved rows (interleaved_rows.h), block by block as the file stored it: the path
// of the targets without row groups (each block copied back together, then as GgmlRow), so that
// interleaved weights run, with the same bits, on every target.
template <class F>
struct InterleavedGgmlRow {
  using Format = F;
  const GgmlRows* w;
  const uint8_t* group;
  int64_t lane, blocks;

  InterleavedGgmlRow(const GgmlRows& rows, int64_t r)
      : w(&rows), group(rows.data + (r - r % kInterleavedRows) * rows.row_bytes), lane(r % kInterleavedRows),
        blocks(rows.cols / F::kElems) {}

  void prefetch() const {
    if (lane == 0) prefetch_ahead(group, kInterleavedRows * blocks * F::kBytes);
  }

  int64_t units() const { return blocks * F::kUnits; }

  template <class Row>
  HWY_INLINE void unit(int64_t u, Row& row) const {
    uint8_t block[F::kBytes];
    const int64_t b = u / F::kUnits;
    deinterleave_ggml_block(w->format, group, b, lane, block);
    F::Unit(block, F::Read(block), b * F::kElems, static_cast<int>(u % F::kUnits), row);
  }

  template <int K0, class Row>
  HWY_INLINE void four_at(int64_t u0, Row& row) const {
    if constexpr (F::kUnits == 1) {
      for (int k = 0; k < 4; ++k) unit(u0 + K0 + k, row);
    } else {  // four units of one block
      uint8_t block[F::kBytes];
      const int64_t b = u0 / F::kUnits;
      deinterleave_ggml_block(w->format, group, b, lane, block);
      const typename F::Header h = F::Read(block);
      for (int k = 0; k < 4; ++k) F::Unit(block, h, b * F::kElems, K0 + k, row);
    }
  }
};

// Every unit of a row, in order, into `row`, which is told after each four units (or fewer, at the
// row's end) to take them: row.flush(first unit, count). Units go four at a time from a multiple
// of eight (four_at<0 or 4>), so that a unit's place within its block and among the partials is a
// constant at compile time.
template <class RowOf, class Row>
HWY_INLINE void RunUnits(const RowOf& one, Row& row) {
  const int64_t units = one.units();
  int64_t u0 = 0;
  for (; u0 + 8 <= units; u0 += 8) {
    one.template four_at<0>(u0, row);
    row.flush(u0, 4);
    one.template four_at<4>(u0, row);
    row.flush(u0 + 4, 4);
  }
  if (u0 + 4 <= units) {
    one.template four_at<0>(u0, row);
    row.flush(u0, 4);
    u0 += 4;
  }
  if (u0 < units) {  // a row of 32 n columns, n not a multiple of 4 (gpt-oss's 2880)
    const int n = static_cast<int>(units - u0);
    for (int k = 0; k < n; ++k) one.unit(u0 + k, row);
    row.flush(u0, n);
  }
}

#if HWY_TARGET != HWY_SCALAR
// One row against kNT tokens: each unit's code vectors are made once and multiplied with every
// token's activations, and each unit's products summed in int32 lanes. Every four units, their
// lane sums are reduced together (a transpose of adds) into one vector of four exact unit sums,
// which takes the float work of the four units at once: partials u % 8 of four consecutive units
// are four lanes of `low` (units 0-3 of eight) or `high` (4-7).
// The sums of the lanes of v[0], .., v[3], in the four lanes of one vector.
template <class DV>  // D32 (a template, so that `if constexpr` drops the other lane count's branch)
HWY_INLINE hn::Vec<D4> four_sums(DV d32, const hn::Vec<DV>* v) {
  const hn::RepartitionToWide<DV> d64;
  const auto a = hn::Add(hn::InterleaveLower(d32, v[0], v[1]), hn::InterleaveUpper(d32, v[0], v[1]));
  const auto b = hn::Add(hn::InterleaveLower(d32, v[2], v[3]), hn::InterleaveUpper(d32, v[2], v[3]));
  const auto a64 = hn::BitCast(d64, a), b64 = hn::BitCast(d64, b);
  const auto c = hn::Add(hn::BitCast(d32, hn::InterleaveLower(d64, a64, b64)),
                         hn::BitCast(d32, hn::InterleaveUpper(d64, a64, b64)));
  if constexpr (hn::MaxLanes(DV()) == 8) return hn::Add(hn::LowerHalf(c), hn::UpperHalf(hn::Half<DV>(), c));
  else return c;
}

// Four floats as a vector, from registers: four scalar stores read back as one vector would stall
// on store forwarding.
HWY_INLINE hn::Vec<DF4> four_floats(const float* f) {
#if HWY_ARCH_X86 && HWY_TARGET != HWY_EMU128
  return hn::Vec<DF4>{_mm_setr_ps(f[0], f[1], f[2], f[3])};
#else
  alignas(16) const float v[4] = {f[0], f[1], f[2], f[3]};
  return hn::Load(DF4(), v);
#endif
}

template <int kNT>
struct RowTokens {
  const int16_t* xq[kNT];     // the tokens' quantized activations, at the row's first element
  const float* xscale[kNT];   // per unit
  const float* xsum[kNT];     // per unit
  const int32_t* xqsum[kNT];  // per unit
  hn::Vec<D32> sums[kNT][4];  // the pending units' products, in int32 lanes
  int32_t zero = 0;           // the format's kZero (one format per row)
  // The pending units' weight scales and offsets: scalars (registers, as the unit's index is a
  // constant in RunUnits's unrolled loop), made a vector by four_floats.
  float wscale[4] = {}, offset[4] = {};
  bool has_offsets = false;
  // The pending units' weight scales as one vector, when the row's format gave them so
  // (four_scales, from four_at): the next flush takes it in place of wscale.
  hn::Vec<DF4> wscale4 = hn::Zero(DF4());
  bool has_wscale4 = false;
  hn::Vec<DF4> low[kNT], high[kNT];

  RowTokens(const I16Activations& a, int64_t t0) {
    const int64_t units = a.cols / 32;
    KEEL_UNROLL_TOKENS
    for (int t = 0; t < kNT; ++t) {
      xq[t] = a.q.data() + (t0 + t) * a.cols;
      xscale[t] = a.scale.data() + (t0 + t) * units;
      xsum[t] = a.sum.data() + (t0 + t) * units;
      xqsum[t] = a.qsum.data() + (t0 + t) * units;
      low[t] = high[t] = hn::Zero(DF4());
    }
  }

  // The lane of the unit at element `first` among the four pending (unsigned: a mask the compiler
  // folds to a constant in RunUnits's unrolled loops).
  static int pending_slot(int64_t first) { return static_cast<int>((static_cast<uint64_t>(first) >> 5) & 3); }

  // The unit of 32 codes starting at element `first` of the row: codes(e) gives the code vector of
  // its elements e .. e + L; kZero comes off at flush, from the four units' sums at once.
  template <int kZero = 0, class Codes>
  HWY_INLINE void unit(int64_t first, float scale, const Codes& codes) {
    zero = kZero;
    const D16 d16;
    const D32 d32;
    const int L = static_cast<int>(hn::Lanes(d16));
    const int k = pending_slot(first);
    hn::Vec<D32> s0[kNT], s1[kNT];
    KEEL_UNROLL_TOKENS
    for (int t = 0; t < kNT; ++t) s0[t] = s1[t] = hn::Zero(d32);
    for (int e = 0; e < 32; e += L) {
      const V16 c = codes(e);
      KEEL_UNROLL_TOKENS
      for (int t = 0; t < kNT; ++t)
        s0[t] = hn::ReorderWidenMulAccumulate(d32, c, hn::LoadU(d16, xq[t] + first + e), s0[t], s1[t]);
    }
    KEEL_UNROLL_TOKENS
    for (int t = 0; t < kNT; ++t) sums[t][k] = hn::Add(s0[t], s1[t]);
    wscale[k] = scale;
  }

  HWY_INLINE void four_scales(hn::Vec<DF4> w) {
    wscale4 = w;
    has_wscale4 = true;
  }

  // The c * sum(x) term of a unit of 32 (c = -dmin * m for Q4_K/Q5_K, an MLX group's bias).
  HWY_INLINE void offset_term(int64_t first, float c) {
    offset[pending_slot(first)] = c;
    has_offsets = true;
  }

  // Units u0 .. u0 + n (n <= 4, u0 a multiple of 4) into their partials.
  HWY_INLINE void flush(int64_t u0, int n) {
    const DF4 df;
    const D4 d4;
    alignas(16) float xs_tail[kNT][4], xsum_tail[kNT][4];
    alignas(16) int32_t qsum_tail[kNT][4];
    if (n < 4) {  // the row's last units: the missing ones add nothing
      for (int k = n; k < 4; ++k) {
        for (int t = 0; t < kNT; ++t) sums[t][k] = hn::Zero(D32());
        wscale[k] = offset[k] = 0.0f;
      }
      for (int t = 0; t < kNT; ++t)
        for (int k = 0; k < 4; ++k) {
          xs_tail[t][k] = k < n ? xscale[t][u0 + k] : 0.0f;
          xsum_tail[t][k] = k < n ? xsum[t][u0 + k] : 0.0f;
          qsum_tail[t][k] = k < n ? xqsum[t][u0 + k] : 0;
        }
    }
    const auto w = has_wscale4 ? wscale4 : four_floats(wscale), c = four_floats(offset);
    has_wscale4 = false;
    KEEL_UNROLL_TOKENS
    for (int t = 0; t < kNT; ++t) {
      const auto xs = n < 4 ? hn::Load(df, xs_tail[t]) : hn::LoadU(df, xscale[t] + u0);
      auto unit_sums = four_sums(D32(), sums[t]);
      if (zero != 0) {
        const auto qs = n < 4 ? hn::Load(d4, qsum_tail[t]) : hn::LoadU(d4, xqsum[t] + u0);
        unit_sums = hn::Sub(unit_sums, hn::Mul(hn::Set(d4, zero), qs));
      }
      const auto product = hn::Mul(hn::Mul(w, xs), hn::ConvertTo(df, unit_sums));
      hn::Vec<DF4>& p = (static_cast<uint64_t>(u0) & 4) == 0 ? low[t] : high[t];
      p = hn::Add(p, product);
      if (has_offsets)
        p = hn::Add(p, hn::Mul(c, n < 4 ? hn::Load(df, xsum_tail[t]) : hn::LoadU(df, xsum[t] + u0)));
    }
  }

  HWY_INLINE void store(float* y, int64_t y_stride) {
    KEEL_UNROLL_TOKENS
    for (int t = 0; t < kNT; ++t) {
      alignas(16) float p[kPartials];
      hn::Store(low[t], DF4(), p);
      hn::Store(high[t], DF4(), p + 4);
      y[t * y_stride] = partials_sum(p);
    }
  }
};
#else
// The scalar target: the same sums, one unit at a time.
template <int kNT>
struct RowTokens {
  const int16_t* xq[kNT];
  const float* xscale[kNT];
  const float* xsum[kNT];
  float p[kNT][kPartials] = {};

  RowTokens(const I16Activations& a, int64_t t0) {
    const int64_t units = a.cols / 32;
    for (int t = 0; t < kNT; ++t) {
      xq[t] = a.q.data() + (t0 + t) * a.cols;
      xscale[t] = a.scale.data() + (t0 + t) * units;
      xsum[t] = a.sum.data() + (t0 + t) * units;
    }
  }

  template <int kZero = 0, class Codes>
  HWY_INLINE void unit(int64_t first, float scale, const Codes& codes) {
    const D16 d16;
    const D32 d32;
    const int64_t u = first / 32;
    for (int t = 0; t < kNT; ++t) {
      auto s0 = hn::Zero(d32), s1 = hn::Zero(d32);
      for (int e = 0; e < 32; ++e)
        s0 = hn::ReorderWidenMulAccumulate(d32, hn::Sub(codes(e), hn::Set(d16, kZero)), hn::LoadU(d16, xq[t] + first + e),
                                           s0, s1);
      const auto sum = static_cast<float>(hn::GetLane(hn::Add(s0, s1)));
      float& partial = p[t][u % kPartials];
      partial = partial + (scale * xscale[t][u]) * sum;
    }
  }

  HWY_INLINE void offset_term(int64_t first, float c) {
    const int64_t u = first / 32;
    for (int t = 0; t < kNT; ++t) p[t][u % kPartials] = p[t][u % kPartials] + c * xsum[t][u];
  }

  HWY_INLINE void flush(int64_t, int) {}

  HWY_INLINE void store(float* y, int64_t y_stride) {
    for (int t = 0; t < kNT; ++t) y[t * y_stride] = partials_sum(p[t]);
  }
};
#endif

// ---- Token tiles: rows across the lanes, for prefill. A task's rows are decoded once, in groups of
// kGroupRows (the int32 lanes of a vector: 8 on AVX2 and AVX-512, 4 on SSE4 and NEON) with pair P
// of each unit of the group's rows side by side, so that one load gives that pair of codes for
// every row of the group and one broadcast gives it of a token's activations. kTileTokens tokens
// at a time then run against each group. The float work per unit is one vector per token for the
// whole group, where the row-at-a-time path spends it per row. Each (row, token) runs the exact
// unit sums and the float operations of RowTokens, in its order: the same bits. x86 only: the
// tiles need VPMADDWD's pairs (lane k = the products of int16 lanes 2k and 2k + 1, one row's pair
// of codes); NEON's widening multiply puts other lanes together, and the scalar target has one.
// Elsewhere every token runs the row path.
#undef KEEL_GROUP_TILES  // this file is compiled once per target
#define KEEL_GROUP_TILES (HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128)
#if KEEL_GROUP_TILES
using DG16 = hn::Repartition<int16_t, D32>;
constexpr int kGroupRows = static_cast<int>(hn::MaxLanes(D32()));
constexpr int64_t kTileTokens = 4, kTiledFrom = 8;  // tiles for 8 tokens or more

// A row decoded once: the calls RowTokens would receive, recorded. A format calls offset_term for
// all of its units or for none.
struct DecodedRow {
  int16_t* codes;  // [cols]: in the activations' order
  float* scale;    // [cols / 32]
  float* offset;   // [cols / 32]
  bool has_offsets = false;

  template <int kZero = 0, class Codes>
  HWY_INLINE void unit(int64_t first, float s, const Codes& codes_of) {
    const D16 d16;
    const int L = static_cast<int>(hn::Lanes(d16));
    for (int e = 0; e < 32; e += L) hn::StoreU(hn::Sub(codes_of(e), hn::Set(d16, kZero)), d16, codes + first + e);
    scale[first / 32] = s;
  }
  HWY_INLINE void offset_term(int64_t first, float c) {
    offset[first / 32] = c;
    has_offsets = true;
  }
  HWY_INLINE void flush(int64_t, int) {}
};

// The rows of a group, interleaved: codes [unit][pair][kGroupRows] (a pair of int16 codes in each
// int32), scales and offsets [unit][kGroupRows]. Rows past the task's end are zeros.
struct RowGroup {
  int32_t* codes;
  float* scales;
  float* offsets;
};

// A group's outputs for one token from its partials ([kPartials][kGroupRows]): the fixed tree of
// partials_sum, one lane per row.
HWY_INLINE void StoreGroupOutputs(const float* p, float* y) {
  const DF df;
  hn::Vec<DF> q[4];
  for (int i = 0; i < 4; ++i) q[i] = hn::Add(hn::LoadU(df, p + i * kGroupRows), hn::LoadU(df, p + (i + 4) * kGroupRows));
  hn::StoreU(hn::Add(hn::Add(q[0], q[2]), hn::Add(q[1], q[3])), df, y);
}

// kTileTokens tokens from t0 against kG groups (1 or 2) side by side: each broadcast of a token's
// activation pair serves every group, so two groups take fewer instructions per product than one.
// out [kG][kTileTokens][kGroupRows]. The partials live in `partials` ([kG][kTileTokens][kPartials]
// [kGroupRows], in L1): a unit's float work loads and stores one vector of them per token and group.
// Each (row, token) gets the same unit sums (exact, in int32) and float operations whatever kG.
template <int kG, bool kVnni>
HWY_INLINE void GroupTile(const RowGroup* g, bool has_offsets, const I16Activations& a, int64_t t0, float* partials,
                          float* out) {
  const D32 d32;
  const DG16 d16;
  const DF df;
  const int64_t units = a.cols / 32;
  constexpr int64_t kGroupPartials = kTileTokens * kPartials * kGroupRows;
  std::fill(partials, partials + kG * kGroupPartials, 0.0f);
  for (int64_t u = 0; u < units; ++u) {
    const int32_t* codes[kG];
    hn::Vec<D32> dot[kG][kTileTokens], unused[kG][kTileTokens];
    for (int k = 0; k < kG; ++k) {
      codes[k] = g[k].codes + u * 16 * kGroupRows;
      for (int t = 0; t < kTileTokens; ++t) dot[k][t] = unused[k][t] = hn::Zero(d32);
    }
    // Unrolled: as a loop, GCC spent a register move per token and the loop's own count on every
    // pair, a third of the loop's instructions.
#pragma GCC unroll 4
    for (int pair = 0; pair < 16; ++pair) {
      hn::Vec<DG16> c[kG];
      for (int k = 0; k < kG; ++k) c[k] = hn::BitCast(d16, hn::LoadU(d32, codes[k] + pair * kGroupRows));
      KEEL_UNROLL_TOKENS
      for (int t = 0; t < kTileTokens; ++t) {
        int32_t x;
        std::memcpy(&x, a.q.data() + (t0 + t) * a.cols + 32 * u + 2 * pair, 4);
        const auto xv = hn::BitCast(d16, hn::Set(d32, x));
        for (int k = 0; k < kG; ++k) {
          // VPDPWSSD's sum is its own chain (latency 4 or 5): odd pairs in a second one, where the 32
          // registers of AVX-512 have room for it. VPMADDWD's chain is the add.
          if (kVnni && pair % 2) unused[k][t] = DotPairs<true>(d32, c[k], xv, unused[k][t], dot[k][t]);
          else dot[k][t] = DotPairs<kVnni>(d32, c[k], xv, dot[k][t], unused[k][t]);
        }
      }
    }
    for (int k = 0; k < kG; ++k) {
      const auto scale = hn::LoadU(df, g[k].scales + u * kGroupRows);
      const auto c = hn::LoadU(df, g[k].offsets + u * kGroupRows);
      KEEL_UNROLL_TOKENS
      for (int t = 0; t < kTileTokens; ++t) {
        const size_t at = static_cast<size_t>((t0 + t) * units + u);
        float* partial = partials + k * kGroupPartials + (t * kPartials + u % kPartials) * kGroupRows;
        const auto product = hn::Mul(hn::Mul(scale, hn::Set(df, a.scale[at])), hn::ConvertTo(df, hn::Add(dot[k][t], unused[k][t])));
        auto p = hn::Add(hn::LoadU(df, partial), product);
        if (has_offsets) p = hn::Add(p, hn::Mul(c, hn::Set(df, a.sum[at])));
        hn::StoreU(p, df, partial);
      }
    }
  }
  for (int k = 0; k < kG; ++k)
    for (int t = 0; t < kTileTokens; ++t)
      StoreGroupOutputs(partials + k * kGroupPartials + t * kPartials * kGroupRows,
                        out + (k * kTileTokens + t) * kGroupRows);
}

// A group's rows, decoded row by row (rows [kGroupRows][cols] int16: a pair of codes per int32),
// into the group's layout, codes [pair][kGroupRows]. On x86 from AVX2 up, 8 x 8 pairs at a time:
// interleaves within 128-bit blocks, then the blocks' halves (40 instructions where pair-by-pair
// copies took 128); the 4-lane targets copy pair by pair.
HWY_INLINE void InterleaveGroup(const int16_t* rows, int64_t cols, int32_t* codes) {
  const int64_t pairs = cols / 2;  // a multiple of 16
  const auto* src = reinterpret_cast<const int32_t*>(rows);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  const hn::CappedTag<int32_t, 8> d8;
  const hn::Repartition<int64_t, decltype(d8)> d64;
  using V = hn::Vec<decltype(d8)>;
  for (int64_t half = 0; half < kGroupRows; half += 8)
    for (int64_t p = 0; p < pairs; p += 8) {
      V v[8], t[8], u[8];
      for (int i = 0; i < 8; ++i) v[i] = hn::LoadU(d8, src + (half + i) * pairs + p);
      for (int i = 0; i < 8; i += 2) {  // t[i]: pairs 0, 1 | 4, 5 of rows i, i + 1; t[i + 1]: 2, 3 | 6, 7
        t[i] = hn::InterleaveLower(d8, v[i], v[i + 1]);
        t[i + 1] = hn::InterleaveUpper(d8, v[i], v[i + 1]);
      }
      for (int i = 0; i < 8; i += 4)  // u[i + k]: pair k | k + 4 of rows i .. i + 3
        for (int k = 0; k < 2; ++k) {
          const auto a = hn::BitCast(d64, t[i + k]), b = hn::BitCast(d64, t[i + k + 2]);
          u[i + 2 * k] = hn::BitCast(d8, hn::InterleaveLower(d64, a, b));
          u[i + 2 * k + 1] = hn::BitCast(d8, hn::InterleaveUpper(d64, a, b));
        }
      for (int k = 0; k < 4; ++k) {  // rows 0-3 low, 4-7 high
        hn::StoreU(hn::ConcatLowerLower(d8, u[4 + k], u[k]), d8, codes + (p + k) * kGroupRows + half);
        hn::StoreU(hn::ConcatUpperUpper(d8, u[4 + k], u[k]), d8, codes + (p + k + 4) * kGroupRows + half);
      }
    }
#else
  for (int64_t lane = 0; lane < kGroupRows; ++lane)
    for (int64_t p = 0; p < pairs; ++p) codes[p * kGroupRows + lane] = src[lane * pairs + p];
#endif
}

// ---- Interleaved rows (interleaved_rows.h: every format but MLX), on the targets with
// 8-row groups (AVX2 and up): a group of 8 rows is read as the file's codes, in place. A block
// column is the 8 rows' scales and loads of 16 bytes, each widened to pairs of codes of all 8 rows
// (for the 4-bit formats, one pair from the low nibbles and another from the high ones): for
// prefill, the RowGroup of the tiles, with no row decoded and no transpose; for decode, multiplied
// (VPMADDWD) with a broadcast of the token's activation pair, then one vector of float work per
// token for the 8 rows, where the row path spent a horizontal sum and the float work on each row's
// each unit.
// Each (row, token) gets the exact unit sums and the float operations of RowTokens (decode: a code
// offset taken off the unit's sum as the offset times the activations' sum), in its order: the
// same bits.
#undef KEEL_INTERLEAVED_GROUPS
#define KEEL_INTERLEAVED_GROUPS (KEEL_GROUP_TILES && HWY_TARGET <= HWY_AVX2)
#if KEEL_INTERLEAVED_GROUPS
// A format's block columns (C = Columns<F>): kBytes a column (a block of each of the 8 rows), kUnits
// its units of 32 elements, made kShared at a time (units whose codes come from the same loads),
// kZero the code offset. ReadHead(column) reads what its units scale by: Scale(head, j) unit j's
// weight scales for the 8 rows, and where kHasOffsets, Offset(head, j) its offsets (Q4_K's
// -(dmin * m)). Units<G>(column).Pairs(c, low, high) gives, for unit k of the G-th kShared, the
// codes of pairs c (elements 2c, 2c + 1) in low[k] and c + 8 (2c + 16, 2c + 17) in high[k], a
// row's pair in each int32 lane, kZero not taken off.
template <class F>
struct Columns;

// The formats of one unit a column (Q4_0, MXFP4, Q8_0, Q5_0), from C's Scales and Pairs. For the
// 4-bit formats both pairs come from one 16-byte chunk (low and high nibbles).
template <class C>
struct OneUnitColumns {
  static constexpr int kUnits = 1, kShared = 1;
  using Head = hn::Vec<DF>;
  HWY_INLINE static Head ReadHead(const uint8_t* column) { return C::Scales(column); }
  HWY_INLINE static hn::Vec<DF> Scale(const Head& h, int) { return h; }
  template <int G>
  struct Units {
    const uint8_t* column;
    HWY_INLINE explicit Units(const uint8_t* c) : column(c) {}
    static constexpr int Unit(int) { return 0; }
    HWY_INLINE void Pairs(int c, V16* low, V16* high) const { C::Pairs(column, c, low[0], high[0]); }
  };
};

// f(std::integral_constant<int, 0>()), .., f(std::integral_constant<int, kN - 1>()): an index a
// constant in each call, so that the shifts and load offsets it picks are too.
template <int kN, class F>
HWY_INLINE void Unrolled(const F& f) {
  [&]<int... kI>(std::integer_sequence<int, kI...>) KEEL_INLINE_LAMBDA {
    (f(std::integral_constant<int, kI>()), ...);
  }(std::make_integer_sequence<int, kN>());
}

template <>
struct Columns<Q4_0K> : OneUnitColumns<Columns<Q4_0K>> {
  static constexpr int64_t kHeader = 2, kBytes = kInterleavedRows * 18;
  static constexpr int kZero = 8;
  HWY_INLINE static hn::Vec<DF> Scales(const uint8_t* column) {  // f16 d
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(DF(), hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(column)));
  }
  HWY_INLINE static void Pairs(const uint8_t* column, int c, V16& low, V16& high) {
    const V16 b = bytes_u(column + kInterleavedRows * kHeader + 16 * c);
    low = hn::And(b, hn::Set(D16(), 15));
    high = hn::ShiftRight<4>(b);
  }
};

template <>
struct Columns<Mxfp4K> : OneUnitColumns<Columns<Mxfp4K>> {
  static constexpr int64_t kHeader = 1, kBytes = kInterleavedRows * 17;
  static constexpr int kZero = 0;
  // 2^(e - 128) from e8m0 e, as ggml_e8m0_half_bits forms it, for the 8 rows in one vector (a
  // scalar loop's stores, read back as a vector, stalled every column).
  HWY_INLINE static hn::Vec<DF> Scales(const uint8_t* column) {
    const hn::RebindToUnsigned<DF> du;
    const auto e = hn::PromoteTo(du, hn::LoadU(hn::Rebind<uint8_t, decltype(du)>(), column));
    const auto one = hn::Set(du, 1u);
    const auto normal = hn::ShiftLeft<23>(hn::Sub(e, one));
    const auto subnormal = hn::Shl(hn::Set(du, 0x00200000u), e);  // e = 0 or 1
    return hn::BitCast(DF(), hn::IfThenElse(hn::Lt(e, hn::Set(du, 2u)), subnormal, normal));
  }
  HWY_INLINE static void Pairs(const uint8_t* column, int c, V16& low, V16& high) {  // twice e2m1, by table
    const DI8 d8;
    const DU8 du8;
    const auto table = hn::LoadU(hn::Full128<int8_t>(), kGgmlTwiceE2m1);
    const auto b = hn::LoadU(du8, column + kInterleavedRows * kHeader + 16 * c);  // unsigned: Mxfp4K::Unit
    low = hn::PromoteTo(D16(), hn::TableLookupBytes(table, hn::BitCast(d8, hn::And(b, hn::Set(du8, 15)))));
    high = hn::PromoteTo(D16(), hn::TableLookupBytes(table, hn::BitCast(d8, hn::ShiftRight<4>(b))));
  }
};

template <>
struct Columns<Q8_0K> : OneUnitColumns<Columns<Q8_0K>> {
  static constexpr int64_t kHeader = 2, kBytes = kInterleavedRows * 34;
  static constexpr int kZero = 0;
  HWY_INLINE static hn::Vec<DF> Scales(const uint8_t* column) { return Columns<Q4_0K>::Scales(column); }
  HWY_INLINE static void Pairs(const uint8_t* column, int c, V16& low, V16& high) {  // int8 codes, chunk c = pair c
    low = bytes_i(column + kInterleavedRows * kHeader + 16 * c);
    high = bytes_i(column + kInterleavedRows * kHeader + 16 * (c + 8));
  }
};

// Q5_0: all of a block's 22 bytes in chunks of 2, so a column is d of the 8 rows, qh's low and high
// halves of the 8 rows (bit j is bit 4 of element j), then the codes as Q4_0's. Each row's qh half
// is set in both int16 lanes of its pair, and lane k of pair c keeps bit 2c + k.
template <>
struct Columns<Q5_0K> : OneUnitColumns<Columns<Q5_0K>> {
  static constexpr int64_t kBytes = kInterleavedRows * 22;
  static constexpr int kZero = 16;
  HWY_INLINE static hn::Vec<DF> Scales(const uint8_t* column) { return Columns<Q4_0K>::Scales(column); }
  HWY_INLINE static void Pairs(const uint8_t* column, int c, V16& low, V16& high) {
    const D32 d32;
    const D16 d16;
    const hn::Rebind<uint16_t, D32> du16;
    auto both_lanes = [&](const uint8_t* p) KEEL_INLINE_LAMBDA {  // a row's 16 bits in its pair's two lanes
      const auto w = hn::PromoteTo(d32, hn::LoadU(du16, reinterpret_cast<const uint16_t*>(p)));
      return hn::BitCast(d16, hn::Or(w, hn::ShiftLeft<16>(w)));
    };
    const auto bit = hn::BitCast(d16, hn::Set(d32, static_cast<int32_t>((1u << (2 * c)) | (1u << (2 * c + 1)) << 16)));
    auto fifth = [&](V16 half) KEEL_INLINE_LAMBDA {  // 16 where the element's bit is set
      return hn::IfThenElseZero(hn::Eq(hn::And(half, bit), bit), hn::Set(d16, 16));
    };
    const V16 b = bytes_u(column + 3 * 16 + 16 * c);
    low = hn::Or(hn::And(b, hn::Set(d16, 15)), fifth(both_lanes(column + 16)));
    high = hn::Or(hn::ShiftRight<4>(b), fifth(both_lanes(column + 32)));
  }
};

// Q4_K: all of a block's 144 bytes in chunks of 2 (no header apart), so a column (1152 bytes) is
// d of the 8 rows (16 bytes), dmin, the 12 scale bytes in 6 chunks, then the codes: chunk 8 + 16i + p
// is code bytes 32i + 2p, 32i + 2p + 1, whose low nibbles are pair p of sub-block 2i and high
// nibbles pair p of sub-block 2i + 1. Its 8 sub-blocks' scales and offsets are formed for the 8
// rows at once, as QK45::ReadInto forms them for one (d * sc, -(dmin * m)).
template <>
struct Columns<QK45<false>> {
  static constexpr int64_t kBytes = kInterleavedRows * 144;
  static constexpr int kUnits = 8, kShared = 2, kZero = 0;
  static constexpr bool kHasOffsets = true;
  struct Head {
    hn::Vec<DF> scale[8], offset[8];  // sub-block j of the 8 rows
  };
  HWY_INLINE static hn::Vec<DF> Scale(const Head& h, int j) { return h.scale[j]; }
  HWY_INLINE static hn::Vec<DF> Offset(const Head& h, int j) { return h.offset[j]; }
  HWY_INLINE static Head ReadHead(const uint8_t* column) {
    Head h;
    const D32 d32;
    const DF df;
    const hn::Rebind<hwy::float16_t, DF> dh;
    const auto d = hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(column)));
    const auto dmin = hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(column + 16)));
    // byte k of the 8 rows' scales, in int32 lanes (chunk k / 2: even bytes the low half).
    auto byte = [&](int k) KEEL_INLINE_LAMBDA {
      const auto pair = hn::BitCast(d32, bytes_u(column + 32 + 16 * (k / 2)));
      return k % 2 == 0 ? hn::And(pair, hn::Set(d32, 0xff)) : hn::ShiftRight<16>(pair);
    };
    const auto m63 = hn::Set(d32, 63), m15 = hn::Set(d32, 15);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      hn::Vec<D32> sc, m;
      if (j < 4) {
        sc = hn::And(byte(j), m63);
        m = hn::And(byte(j + 4), m63);
      } else {
        const auto hi = byte(j + 4);
        sc = hn::Or(hn::And(hi, m15), hn::ShiftLeft<4>(hn::ShiftRight<6>(byte(j - 4))));
        m = hn::Or(hn::ShiftRight<4>(hi), hn::ShiftLeft<4>(hn::ShiftRight<6>(byte(j))));
      }
      h.scale[j] = hn::Mul(d, hn::ConvertTo(df, sc));
      h.offset[j] = hn::Neg(hn::Mul(dmin, hn::ConvertTo(df, m)));
    }
    return h;
  }
  // Sub-blocks 2G (the low nibbles) and 2G + 1 (the high ones): pair c of both is chunk 16G + c.
  template <int G>
  struct Units {
    const uint8_t* codes;
    HWY_INLINE explicit Units(const uint8_t* column) : codes(column + 16 * (8 + 16 * G)) {}
    static constexpr int Unit(int k) { return 2 * G + k; }
    HWY_INLINE void Pairs(int c, V16* low, V16* high) const {
      const D16 d16;
      const V16 b = bytes_u(codes + 16 * c), b8 = bytes_u(codes + 16 * (c + 8));
      low[0] = hn::And(b, hn::Set(d16, 15));
      low[1] = hn::ShiftRight<4>(b);
      high[0] = hn::And(b8, hn::Set(d16, 15));
      high[1] = hn::ShiftRight<4>(b8);
    }
  };
};


// Q5_K: Q4_K's column with qh (32 bytes) between the scales and the codes: chunks 0-7 as Q4_K's
// (so the same head), qh in chunks 8-23 (chunk 8 + p: qh bytes 2p, 2p + 1, whose bit j is bit 4 of
// elements 2p, 2p + 1 of sub-block j), the codes from chunk 24 in Q4_K's order. A pair's bits are
// made as bytes, 32 at a time (chunk c in the low half, c + 8 in the high), then widened, as Q6_K's.
template <>
struct Columns<QK45<true>> {
  using Q4K = Columns<QK45<false>>;
  static constexpr int64_t kBytes = kInterleavedRows * 176;
  static constexpr int kUnits = 8, kShared = 2, kZero = 0;
  static constexpr bool kHasOffsets = true;
  using Head = Q4K::Head;
  HWY_INLINE static Head ReadHead(const uint8_t* column) { return Q4K::ReadHead(column); }
  HWY_INLINE static hn::Vec<DF> Scale(const Head& h, int j) { return h.scale[j]; }
  HWY_INLINE static hn::Vec<DF> Offset(const Head& h, int j) { return h.offset[j]; }
  // Sub-blocks 2G (low nibbles, qh bit 2G) and 2G + 1 (high nibbles, bit 2G + 1).
  template <int G>
  struct Units {
    const uint8_t* codes;
    const uint8_t* qh;
    HWY_INLINE explicit Units(const uint8_t* column) : codes(column + 16 * (24 + 16 * G)), qh(column + 16 * 8) {}
    static constexpr int Unit(int k) { return 2 * G + k; }
    HWY_INLINE void Pairs(int c, V16* low, V16* high) const {
      const D16 d16;
      const DB db;
      const hn::Half<DB> dh;
      auto two_chunks = [&](const uint8_t* p) KEEL_INLINE_LAMBDA {
        return hn::Combine(db, hn::LoadU(dh, p + 16 * (c + 8)), hn::LoadU(dh, p + 16 * c));
      };
      const auto l = two_chunks(codes);
      const auto h = hn::BitCast(d16, two_chunks(qh));
      Unrolled<2>([&](auto k) KEEL_INLINE_LAMBDA {
        constexpr int kBit = 2 * G + decltype(k)::value;  // qh's bit for this sub-block, moved to bit 4
        const auto four = kBit % 2 == 0 ? l : hn::BitCast(db, hn::ShiftRight<4>(hn::BitCast(d16, l)));
        const auto moved = hn::BitCast(db, kBit <= 4 ? hn::ShiftLeft<4 - kBit>(h) : hn::ShiftRight<kBit - 4>(h));
        const auto bits = hn::Or(hn::And(four, hn::Set(db, 15)), hn::And(moved, hn::Set(db, 16)));  // 0 .. 31
        low[decltype(k)::value] = hn::PromoteTo(d16, hn::LowerHalf(dh, bits));
        high[decltype(k)::value] = hn::PromoteTo(d16, hn::UpperHalf(dh, bits));
      });
    }
  };
};


// Q6_K: all of a block's 210 bytes in chunks of 2, so a column (1680 bytes) is the 8 rows' ql in
// chunks 0-63, qh in 64-95, the int8 scales in 96-103 and d in 104. Unit j = 4n + k (elements
// 128n + 32k ..) takes pair p's low four bits from the low (k < 2) or high nibbles of ql chunk
// 32n + 16(k % 2) + p, its top two from bits 2k, 2k + 1 of qh chunk 64 + 16n + p, and the scale of
// its first (p < 8) or last 16 elements from the even or odd bytes of scale chunk 96 + 4n + k. The
// codes are (bits - 32) * scale, as Q6_KK makes them, against the block's d.
template <>
struct Columns<Q6_KK> {
  static constexpr int64_t kBytes = kInterleavedRows * 210;
  static constexpr int kUnits = 8, kShared = 2, kZero = 0;
  static constexpr bool kSplitHalves = true;  // pairs 0-7 and 8-15 have scales of their own
  using Head = hn::Vec<DF>;  // d
  HWY_INLINE static Head ReadHead(const uint8_t* column) { return Columns<Q4_0K>::Scales(column + 16 * 104); }
  HWY_INLINE static hn::Vec<DF> Scale(const Head& d, int) { return d; }
  // Units 4n + h and 4n + h + 2 (n = G / 2, h = G % 2): the low and high nibbles of the same ql
  // chunks, with qh's bits 2h, 2h + 1 and 2h + 4, 2h + 5. (Four units at once, sharing qh's
  // loads too, spilled registers.)
  template <int G>
  struct Units {
    static constexpr int kN = G / 2, kH = G % 2;
    const uint8_t* ql;
    const uint8_t* qh;
    hn::Vec<D32> scale_low[2], scale_high[2];  // each row's sub-block scales: elements 0-15, 16-31

    HWY_INLINE explicit Units(const uint8_t* column)
        : ql(column + 16 * (32 * kN + 16 * kH)), qh(column + 16 * (64 + 16 * kN)) {
      const D32 d32;
      for (int k = 0; k < 2; ++k) {
        // Row r's two scales, sign-extended, in the halves of int32 lane r.
        const auto both = hn::BitCast(d32, bytes_i(column + 16 * (96 + 4 * kN + kH + 2 * k)));
        scale_low[k] = hn::ShiftRight<16>(hn::ShiftLeft<16>(both));
        scale_high[k] = hn::ShiftRight<16>(both);
      }
    }
    static constexpr int Unit(int k) { return 4 * kN + kH + 2 * k; }
    // Unit k's sum from its halves' sums (kSplitHalves): each scaled in int32. The halves' sums
    // are at most 16 * 32 * 16383 in size, times a scale of at most 128: the whole fits int32, and
    // is the integer the row path sums from the codes times their scales.
    HWY_INLINE hn::Vec<D32> Sum(int k, hn::Vec<D32> low, hn::Vec<D32> high) const {
      return hn::Add(hn::Mul(low, scale_low[k]), hn::Mul(high, scale_high[k]));
    }
    // Pairs' codes times their scales, as Q6_KK makes them (the prefill tiles' row groups).
    HWY_INLINE void ScaleHalves(int k, V16& low, V16& high) const {
      const D16 d16;
      const D32 d32;
      auto both_lanes = [&](hn::Vec<D32> v) KEEL_INLINE_LAMBDA {  // a row's scale in both lanes of its pairs
        return hn::BitCast(d16, hn::Or(hn::And(v, hn::Set(d32, 0xffff)), hn::ShiftLeft<16>(v)));
      };
      low = hn::Mul(low, both_lanes(scale_low[k]));
      high = hn::Mul(high, both_lanes(scale_high[k]));
    }
    // Pairs c and c + 8 (bits - 32, not yet scaled) made as bytes, 32 at a time (chunk c in the
    // low half, c + 8 in the high), then widened: half the instructions of making each in int16
    // lanes.
    HWY_INLINE void Pairs(int c, V16* low, V16* high) const {
      const D16 d16;
      const DB db;
      const hn::Half<DB> dh;
      const hn::Repartition<int8_t, decltype(dh)> dh8;
      auto two_chunks = [&](const uint8_t* p) KEEL_INLINE_LAMBDA {
        return hn::Combine(db, hn::LoadU(dh, p + 16 * (c + 8)), hn::LoadU(dh, p + 16 * c));
      };
      const auto l = two_chunks(ql);
      const auto h = hn::BitCast(d16, two_chunks(qh));
      Unrolled<2>([&](auto k) KEEL_INLINE_LAMBDA {
        constexpr int kK = kH + 2 * decltype(k)::value;  // the unit's k in 4n + k
        // Shifts of 16-bit lanes; the masks keep each byte's own bits.
        const auto four = kK < 2 ? l : hn::BitCast(db, hn::ShiftRight<4>(hn::BitCast(d16, l)));
        // Bits 2k, 2k + 1 of qh moved to bits 4, 5 by one shift.
        const auto moved = hn::BitCast(db, kK == 0   ? hn::ShiftLeft<4>(h)
                                           : kK == 1 ? hn::ShiftLeft<2>(h)
                                           : kK == 2 ? h
                                                     : hn::ShiftRight<2>(h));
        const auto bits = hn::Or(hn::And(four, hn::Set(db, 15)), hn::And(moved, hn::Set(db, 0x30)));
        const auto codes = hn::BitCast(hn::Repartition<int8_t, DB>(), hn::Sub(bits, hn::Set(db, 32)));  // -32 .. 31
        low[decltype(k)::value] = hn::PromoteTo(d16, hn::LowerHalf(dh8, codes));
        high[decltype(k)::value] = hn::PromoteTo(d16, hn::UpperHalf(dh8, codes));
      });
    }
  };
};

// The rows of F are read from columns here (a RowOf of interleaved rows).
template <class RowOf>
constexpr bool kFromColumns = false;
template <class F>
constexpr bool kFromColumns<InterleavedGgmlRow<F>> = requires { Columns<F>::kBytes; };

// Whether C's units sum their two halves apart (Units::Sum, Units::ScaleHalves: Q6_K).
template <class C>
constexpr bool kSplitHalves = requires { C::kSplitHalves; };

// Whether C's units have offset terms (Q4_K's -(dmin * m)).
template <class C>
constexpr bool kColumnOffsets = requires { C::kHasOffsets; };

// Cache lines to ask for ahead of each column: a line at each 64 bytes of it and one more, so that
// none of a column's lines is left out wherever it starts.
template <class C>
constexpr int64_t kColumnLines = C::kBytes / 64 + 1;

// Those lines, the G-th share of them for the G-th kShared units: a column's lines asked for a
// part at a time, not all at once (27 lines of Q6_K at once stall on the core's outstanding misses).
template <class C>
HWY_INLINE void PrefetchColumnPart(const uint8_t* column, int g) {
  constexpr int64_t kParts = C::kUnits / C::kShared, kPer = (kColumnLines<C> + kParts - 1) / kParts;
  for (int64_t line = g * kPer; line < std::min<int64_t>((g + 1) * kPer, kColumnLines<C>); ++line)
    prefetch_at(column, kPrefetchAhead + 64 * line);
}

// A group's RowGroup for the tiles, straight from its columns.
template <class C>
HWY_INLINE void GroupFromColumns(const uint8_t* group, int64_t units, RowGroup g) {
  const D16 d16;
  const DF df;
  const auto zero = hn::Set(d16, C::kZero);
  for (int64_t u0 = 0; u0 < units; u0 += C::kUnits) {
    const uint8_t* column = group + u0 / C::kUnits * C::kBytes;
    for (int64_t line = 0; line < kColumnLines<C>; ++line) prefetch_at(column, kPrefetchAhead + 64 * line);
    const typename C::Head head = C::ReadHead(column);
    for (int j = 0; j < C::kUnits; ++j) {
      hn::StoreU(C::Scale(head, j), df, g.scales + (u0 + j) * kGroupRows);
      if constexpr (kColumnOffsets<C>) hn::StoreU(C::Offset(head, j), df, g.offsets + (u0 + j) * kGroupRows);
      else hn::StoreU(hn::Zero(df), df, g.offsets + (u0 + j) * kGroupRows);
    }
    Unrolled<C::kUnits / C::kShared>([&](auto shared_index) KEEL_INLINE_LAMBDA {
      constexpr int kG = decltype(shared_index)::value;
      const typename C::template Units<kG> shared(column);
      for (int c = 0; c < 8; ++c) {
        V16 low[C::kShared], high[C::kShared];
        shared.Pairs(c, low, high);
        for (int k = 0; k < C::kShared; ++k) {
          if constexpr (kSplitHalves<C>) shared.ScaleHalves(k, low[k], high[k]);
          // [pair][8 rows][2]
          auto* codes = reinterpret_cast<int16_t*>(g.codes + (u0 + shared.Unit(k)) * 16 * kGroupRows);
          hn::StoreU(hn::Sub(low[k], zero), d16, codes + c * 2 * kGroupRows);
          hn::StoreU(hn::Sub(high[k], zero), d16, codes + (c + 8) * 2 * kGroupRows);
        }
      }
    });
  }
}

// A column tile's tokens: their activations, and their partial sums for the 8 rows ([kNT]
// [kPartials][8], in L1), and the outputs they make.
template <int kNT>
struct TileTokens {
  alignas(64) float partials[kNT * kPartials * kGroupRows] = {};
  const int16_t* xq[kNT];  // token t's quantized activations

  TileTokens(const I16Activations& a, int64_t t0) {
    for (int t = 0; t < kNT; ++t) xq[t] = a.q.data() + (t0 + t) * a.cols;
  }
  // Unit u's partial for token t.
  float* partial(int t, int64_t u) { return partials + (t * kPartials + u % kPartials) * kGroupRows; }
  void store(float* y, int64_t y_stride) const {
    for (int t = 0; t < kNT; ++t) StoreGroupOutputs(partials + t * kPartials * kGroupRows, y + t * y_stride);
  }
};

// kNT tokens from t0 against one group: y [kNT][8] (y_stride apart). Per column, its head; per
// kShared units, their codes multiplied with broadcast activation pairs, then each unit's float work
// once for the 8 rows, as RowTokens runs it. One group at a time: two groups' columns read side by
// side, as the tiles do, streamed from memory at half the speed on Zen 4 (two streams 4 KiB apart,
// for a 896-column matrix).
template <class C, int kNT, bool kVnni>
HWY_INLINE void ColumnTile(const uint8_t* group, const I16Activations& a, int64_t t0, bool prefetch, float* y,
                           int64_t y_stride) {
  const D32 d32;
  const D16 d16;
  const DF df;
  constexpr int kS = C::kShared;
  const int64_t units = a.cols / 32;
  TileTokens<kNT> tokens(a, t0);
  const int16_t* const* xq = tokens.xq;
  for (int64_t u0 = 0; u0 < units; u0 += C::kUnits) {
    const uint8_t* column = group + u0 / C::kUnits * C::kBytes;
    const typename C::Head head = C::ReadHead(column);
    Unrolled<C::kUnits / kS>([&](auto shared_index) KEEL_INLINE_LAMBDA {
      constexpr int kG = decltype(shared_index)::value;
      if (prefetch) PrefetchColumnPart<C>(column, kG);
      const typename C::template Units<kG> shared(column);
      // [half][unit][token]: pairs 0-7 in half 0, 8-15 in the last (the same one unless split).
      constexpr int kHalves = kSplitHalves<C> ? 2 : 1;
      hn::Vec<D32> dot[kHalves][kS][kNT], unused[kHalves][kS][kNT];
      for (int h = 0; h < kHalves; ++h)
        for (int k = 0; k < kS; ++k)
          for (int t = 0; t < kNT; ++t) dot[h][k][t] = unused[h][k][t] = hn::Zero(d32);
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) {
        V16 low[kS], high[kS];
        shared.Pairs(c, low, high);
        KEEL_UNROLL_TOKENS
        for (int t = 0; t < kNT; ++t)
          for (int k = 0; k < kS; ++k) {
            int32_t xl, xh;
            const int16_t* x = xq[t] + 32 * (u0 + shared.Unit(k));
            std::memcpy(&xl, x + 2 * c, 4);
            std::memcpy(&xh, x + 16 + 2 * c, 4);
            const auto vl = hn::BitCast(d16, hn::Set(d32, xl)), vh = hn::BitCast(d16, hn::Set(d32, xh));
            dot[0][k][t] = DotPairs<kVnni>(d32, low[k], vl, dot[0][k][t], unused[0][k][t]);
            // VPDPWSSD's sum is its own chain: the high pairs in a second one.
            auto& last = kVnni ? unused[kHalves - 1][k][t] : dot[kHalves - 1][k][t];
            last = DotPairs<kVnni>(d32, high[k], vh, last, unused[kHalves - 1][k][t]);
          }
      }
      for (int k = 0; k < kS; ++k) {
        const int j = shared.Unit(k), u = u0 + j;
        const auto scale = C::Scale(head, j);
        KEEL_UNROLL_TOKENS
        for (int t = 0; t < kNT; ++t) {
          const size_t at = static_cast<size_t>((t0 + t) * units + u);
          auto sum = hn::Add(dot[0][k][t], unused[0][k][t]);
          if constexpr (kHalves == 2) sum = shared.Sum(k, sum, hn::Add(dot[1][k][t], unused[1][k][t]));
          if constexpr (C::kZero != 0) sum = hn::Sub(sum, hn::Set(d32, C::kZero * a.qsum[at]));
          float* partial = tokens.partial(t, u);
          const auto product = hn::Mul(hn::Mul(scale, hn::Set(df, a.scale[at])), hn::ConvertTo(df, sum));
          auto p = hn::Add(hn::LoadU(df, partial), product);
          if constexpr (kColumnOffsets<C>) p = hn::Add(p, hn::Mul(C::Offset(head, j), hn::Set(df, a.sum[at])));
          hn::StoreU(p, df, partial);
        }
      }
    });
  }
  tokens.store(y, y_stride);
}

// kNT tokens from t0 against the groups of rows [r0, r1), whole groups.
template <class C, int kNT, bool kVnni>
void ColumnTokens(const GgmlRows& w, const I16Activations& a, int64_t t0, int64_t r0, int64_t r1, float* y,
                  int64_t y_stride) {
  for (int64_t g = r0; g < r1; g += kGroupRows)
    ColumnTile<C, kNT, kVnni>(w.data + g * w.row_bytes, a, t0, t0 == 0, y + t0 * y_stride + (g - r0), y_stride);
}
#endif  // KEEL_INTERLEAVED_GROUPS

// The tiles' share of Products: every whole tile of tokens; returns the tokens it ran (0 when
// there are too few).
template <class RowOf, bool kVnni, class Rows>
int64_t TiledProducts(const Rows& w, const I16Activations& a, int64_t n_tokens, int64_t r0, int64_t r1, float* y,
                      int64_t y_stride) {
  if (n_tokens < kTiledFrom) return 0;
  const int64_t rows = r1 - r0, groups = (rows + kGroupRows - 1) / kGroupRows, cols = a.cols, units = cols / 32;
  thread_local std::vector<int16_t> row_codes;
  thread_local std::vector<int32_t> codes;
  thread_local std::vector<float> row_scale, row_offset, scales, offsets;
  row_codes.resize(static_cast<size_t>(kGroupRows * cols));
  row_scale.resize(static_cast<size_t>(units));
  row_offset.assign(static_cast<size_t>(units), 0.0f);
  codes.resize(static_cast<size_t>(groups * kGroupRows * cols / 2));
  scales.resize(static_cast<size_t>(groups * kGroupRows * units));
  offsets.resize(static_cast<size_t>(groups * kGroupRows * units));
  auto group = [&](int64_t gi) {
    return RowGroup{codes.data() + gi * kGroupRows * (cols / 2), scales.data() + gi * kGroupRows * units,
                    offsets.data() + gi * kGroupRows * units};
  };
  const RowGroup last = group(groups - 1);  // its lanes past the task's last row stay zeros
  std::fill(last.scales, last.scales + kGroupRows * units, 0.0f);
  std::fill(last.offsets, last.offsets + kGroupRows * units, 0.0f);
  bool has_offsets = false;
#if KEEL_INTERLEAVED_GROUPS
  if constexpr (kFromColumns<RowOf>) {  // whole groups (Gemm)
    has_offsets = kColumnOffsets<Columns<typename RowOf::Format>>;
    for (int64_t gi = 0; gi < groups; ++gi)
      GroupFromColumns<Columns<typename RowOf::Format>>(w.data + (r0 + gi * kGroupRows) * w.row_bytes, units,
                                                        group(gi));
  } else
#endif
  {
    for (int64_t r = 0; r < rows; ++r) {
      const RowOf one(w, r0 + r);
      one.prefetch();
      const int64_t lane = r % kGroupRows;
      DecodedRow row{row_codes.data() + lane * cols, row_scale.data(), row_offset.data()};
      RunUnits(one, row);
      has_offsets = row.has_offsets;  // the same for every row
      const RowGroup g = group(r / kGroupRows);
      for (int64_t u = 0; u < units; ++u) g.scales[u * kGroupRows + lane] = row_scale[static_cast<size_t>(u)];
      for (int64_t u = 0; u < units; ++u) g.offsets[u * kGroupRows + lane] = row_offset[static_cast<size_t>(u)];
      if (lane == kGroupRows - 1 || r == rows - 1) {
        std::fill(row_codes.begin() + (lane + 1) * cols, row_codes.end(), int16_t{0});  // rows past the last
        InterleaveGroup(row_codes.data(), cols, g.codes);
      }
    }
  }
  alignas(64) float partials[2 * kTileTokens * kPartials * kGroupRows];
  alignas(64) float out[2 * kTileTokens * kGroupRows];
  const int64_t end = n_tokens / kTileTokens * kTileTokens;
  for (int64_t t = 0; t < end; t += kTileTokens)
    for (int64_t gi = 0; gi < groups;) {
      const RowGroup two[2] = {group(gi), group(std::min(gi + 1, groups - 1))};
      const int n_groups = gi + 2 <= groups ? 2 : 1;
      if (n_groups == 2) GroupTile<2, kVnni>(two, has_offsets, a, t, partials, out);
      else GroupTile<1, kVnni>(two, has_offsets, a, t, partials, out);
      for (int k = 0; k < n_groups; ++k, ++gi) {
        const int64_t first_row = gi * kGroupRows, n_rows = std::min<int64_t>(kGroupRows, rows - first_row);
        for (int64_t i = 0; i < kTileTokens; ++i)
          std::memcpy(y + (t + i) * y_stride + first_row, out + (k * kTileTokens + i) * kGroupRows,
                      static_cast<size_t>(n_rows) * sizeof(float));
      }
    }
  return end;
}
#endif  // KEEL_GROUP_TILES


// Every row of [r0, r1) against the tokens no tile took: blocks of kTokenBlock tokens outermost,
// so a block's activations (64 x 4864 x 2 bytes at most, in L2) serve every row of the task; in a
// block, each row against two tokens at a time, then one. The rows ahead are prefetched before
// each row.
constexpr int64_t kTokenBlock = 64;
template <class RowOf, bool kVnni, class Rows>
void Products(const Rows& w, const I16Activations& a, int64_t n_tokens, int64_t r0, int64_t r1, float* y,
              int64_t y_stride) {
  int64_t first = 0;
#if KEEL_GROUP_TILES
  first = TiledProducts<RowOf, kVnni>(w, a, n_tokens, r0, r1, y, y_stride);
#endif
  for (int64_t t0 = first; t0 < n_tokens; t0 += kTokenBlock) {
    const int64_t t_end = std::min(n_tokens, t0 + kTokenBlock);
    for (int64_t r = r0; r < r1; ++r) {
      const RowOf one(w, r);
      one.prefetch();
      int64_t t = t0;
      for (; t + 2 <= t_end; t += 2) {
        RowTokens<2> row(a, t);
        RunUnits(one, row);
        row.store(y + t * y_stride + (r - r0), y_stride);
      }
      for (; t < t_end; ++t) {
        RowTokens<1> row(a, t);
        RunUnits(one, row);
        row.store(y + t * y_stride + (r - r0), y_stride);
      }
    }
  }
}

#if KEEL_INTERLEAVED_GROUPS
// Interleaved rows [r0, r1) of F, whole groups: the tiles from their columns for every whole tile
// of tokens (prefill), the columns' own products for the rest (decode, a few tokens).
template <class F, bool kVnni>
void InterleavedProducts(const GgmlRows& w, const I16Activations& a, int64_t n_tokens, int64_t r0, int64_t r1,
                         float* y, int64_t y_stride) {
  using C = Columns<F>;
  int64_t t = TiledProducts<InterleavedGgmlRow<F>, kVnni>(w, a, n_tokens, r0, r1, y, y_stride);
  for (; t + 4 <= n_tokens; t += 4) ColumnTokens<C, 4, kVnni>(w, a, t, r0, r1, y, y_stride);
  switch (n_tokens - t) {
    case 3: ColumnTokens<C, 3, kVnni>(w, a, t, r0, r1, y, y_stride); break;
    case 2: ColumnTokens<C, 2, kVnni>(w, a, t, r0, r1, y, y_stride); break;
    case 1: ColumnTokens<C, 1, kVnni>(w, a, t, r0, r1, y, y_stride); break;
    default: break;
  }
}
#endif

template <class F, bool kVnni>
void Gemm(const GgmlRows& w, const I16Activations& a, int64_t n_tokens, int64_t r0, int64_t r1, float* y,
          int64_t y_stride) {
  if (!w.interleaved) return Products<GgmlRow<F>, kVnni>(w, a, n_tokens, r0, r1, y, y_stride);
#if KEEL_INTERLEAVED_GROUPS
  if constexpr (kFromColumns<InterleavedGgmlRow<F>>)
    if (r0 % kInterleavedRows == 0 && r1 % kInterleavedRows == 0)
      return InterleavedProducts<F, kVnni>(w, a, n_tokens, r0, r1, y, y_stride);
#endif
  Products<InterleavedGgmlRow<F>, kVnni>(w, a, n_tokens, r0, r1, y, y_stride);
}

template <bool kVnni>
void GemmFormat(const GgmlRows& w, const I16Activations& a, int64_t n_tokens, int64_t r0, int64_t r1, float* y,
                int64_t y_stride) {
  switch (w.format) {
    case WeightFormat::Q8_0: return Gemm<Q8_0K, kVnni>(w, a, n_tokens, r0, r1, y, y_stride);
    case WeightFormat::Q4_0: return Gemm<Q4_0K, kVnni>(w, a, n_tokens, r0, r1, y, y_stride);
    case WeightFormat::Q5_0: return Gemm<Q5_0K, kVnni>(w, a, n_tokens, r0, r1, y, y_stride);
    case WeightFormat::Q4_K: return Gemm<QK45<false>, kVnni>(w, a, n_tokens, r0, r1, y, y_stride);
    case WeightFormat::Q5_K: return Gemm<QK45<true>, kVnni>(w, a, n_tokens, r0, r1, y, y_stride);
    case WeightFormat::Q6_K: return Gemm<Q6_KK, kVnni>(w, a, n_tokens, r0, r1, y, y_stride);
    case WeightFormat::MXFP4_GGUF: return Gemm<Mxfp4K, kVnni>(w, a, n_tokens, r0, r1, y, y_stride);
    default: break;
  }
}

template <bool kVnni>
void MlxProducts(const MlxRows& m, const I16Activations& a, int64_t n_tokens, int64_t r0, int64_t r1, float* y,
                 int64_t y_stride) {
  if (m.bits == 4) Products<MlxRow<4>, kVnni>(m, a, n_tokens, r0, r1, y, y_stride);
  else Products<MlxRow<8>, kVnni>(m, a, n_tokens, r0, r1, y, y_stride);
}

// Whether this target reads interleaved rows in row groups (interleaved_rows.h).
bool ReadsInterleavedRows() { return KEEL_INTERLEAVED_GROUPS; }

// Whether the CPU runs VPDPWSSD (EVEX, AVX512_VNNI with AVX512VL): the AVX3 target's choice.
bool UseVnni() {
#if HWY_TARGET == HWY_AVX3
  static const bool has = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl");
  return has;
#else
  return false;
#endif
}

void GemmMlxI16(const MlxRows& m, const I16Activations& a, int64_t n_tokens, int64_t r0, int64_t r1, float* y,
                int64_t y_stride) {
  if (UseVnni()) return MlxProducts<kVnniForm>(m, a, n_tokens, r0, r1, y, y_stride);
  MlxProducts<false>(m, a, n_tokens, r0, r1, y, y_stride);
}

void GemmGgmlI16(const GgmlRows& w, const I16Activations& a, int64_t n_tokens, int64_t r0, int64_t r1, float* y,
                 int64_t y_stride) {
  if (UseVnni()) return GemmFormat<kVnniForm>(w, a, n_tokens, r0, r1, y, y_stride);
  GemmFormat<false>(w, a, n_tokens, r0, r1, y, y_stride);
}

}  // namespace HWY_NAMESPACE
}  // namespace keel::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace keel::ops {

HWY_EXPORT(GemmGgmlI16);
HWY_EXPORT(GemmMlxI16);
HWY_EXPORT(ReadsInterleavedRows);

bool i16_reads_interleaved_rows(WeightFormat f) {
  return ggml_interleavable(f) && HWY_DYNAMIC_DISPATCH(ReadsInterleavedRows)();
}

int16_t i16_activation_limit(WeightFormat f) { return f == WeightFormat::Q6_K ? 16383 : 32767; }

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
  if (a.limit > i16_activation_limit(w.format)) throw InternalError("int16 activations too wide for these rows' sums");
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
