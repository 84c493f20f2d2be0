// Highway re-includes this file once per SIMD target; everything between HWY_BEFORE_NAMESPACE and
// HWY_AFTER_NAMESPACE is compiled for each, and the HWY_ONCE part dispatches at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "keel/ops/simd_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "keel/ops/prefetch.h"
#include "keel/ops/simd_kernels.h"
#include "keel/util/half.h"

HWY_BEFORE_NAMESPACE();
namespace keel::ops {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;

// One accumulator chain per dot product, reduced, then the tail added element by element: the
// same order as GemmRowsF32 uses for each (row, token), so a token's result does not depend on
// how many tokens share the call (chunked prefill equals one-shot prefill, bit for bit).
template <class LoadRow>
HWY_INLINE float DotWith(const LoadRow& load, const float* HWY_RESTRICT x, int64_t cols) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  auto acc = hn::Zero(df);
  int64_t i = 0;
  for (; i + N <= cols; i += N) acc = hn::MulAdd(load(i), hn::LoadU(df, x + i), acc);
  float sum = hn::GetLane(hn::SumOfLanes(df, acc));
  for (; i < cols; ++i) sum += load.scalar(i) * x[i];
  return sum;
}

struct F32Row {
  const float* w;
  HWY_INLINE hn::Vec<DF> operator()(int64_t i) const { return hn::LoadU(DF(), w + i); }
  float scalar(int64_t i) const { return w[i]; }
  F32Row shifted(int64_t n) const { return {w + n}; }
};

struct F16Row {
  const uint16_t* w;
  HWY_INLINE hn::Vec<DF> operator()(int64_t i) const {
    const DF df;
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(w + i)));
  }
  float scalar(int64_t i) const { return f16_to_float(w[i]); }
  F16Row shifted(int64_t n) const { return {w + n}; }
};

struct BF16Row {
  const uint16_t* w;
  HWY_INLINE hn::Vec<DF> operator()(int64_t i) const {
    const DF df;
    const hn::RebindToUnsigned<DF> du32;
    const hn::Rebind<uint16_t, DF> du16;
    auto wide = hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, w + i)));
    return hn::BitCast(df, wide);
  }
  float scalar(int64_t i) const { return bf16_to_float(w[i]); }
  BF16Row shifted(int64_t n) const { return {w + n}; }
};

// y[r - r0] = DotWith(row r, x) for r in [r0, r1), four rows at a time: four independent chains
// cover the multiply-add latency (one chain alone waits on it every vector) and share each load of
// x. While four rows are read, the next four (the bytes right after them) are asked for into L2 in
// address order, as many bytes per step as the step reads (prefetch.h). Each row's chain and tail
// are DotWith's, so the bits are those of one row alone.
template <class Row>
void GemvRows(const Row& first_row, int64_t cols, const float* HWY_RESTRICT x, int64_t r0, int64_t r1, float* y) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  constexpr auto kElement = static_cast<int64_t>(sizeof(*first_row.w));
  auto row = [&](int64_t r) { return first_row.shifted(r * cols); };
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    const Row w0 = row(r), w1 = row(r + 1), w2 = row(r + 2), w3 = row(r + 3);
    auto a0 = hn::Zero(df), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + N <= cols; i += N) {
      // Bytes [4 i, 4 (i + N)) elements into the next four rows; one line per 64 bytes.
      for (int64_t at = (4 * i * kElement + 63) & ~int64_t{63}; at < 4 * (i + N) * kElement; at += 64)
        prefetch_to_l2(w0.w, 4 * cols * kElement + at);
      const auto xv = hn::LoadU(df, x + i);
      a0 = hn::MulAdd(w0(i), xv, a0);
      a1 = hn::MulAdd(w1(i), xv, a1);
      a2 = hn::MulAdd(w2(i), xv, a2);
      a3 = hn::MulAdd(w3(i), xv, a3);
    }
    float s[4] = {hn::GetLane(hn::SumOfLanes(df, a0)), hn::GetLane(hn::SumOfLanes(df, a1)),
                  hn::GetLane(hn::SumOfLanes(df, a2)), hn::GetLane(hn::SumOfLanes(df, a3))};
    const Row* w[4] = {&w0, &w1, &w2, &w3};
    for (int k = 0; k < 4; ++k) {
      for (int64_t j = i; j < cols; ++j) s[k] += w[k]->scalar(j) * x[j];
      y[r + k - r0] = s[k];
    }
  }
  for (; r < r1; ++r) y[r - r0] = DotWith(row(r), x, cols);
}

void GemvF32(const float* w, int64_t cols, const float* x, int64_t r0, int64_t r1, float* y) {
  GemvRows(F32Row{w}, cols, x, r0, r1, y);
}
void GemvF16(const uint16_t* w, int64_t cols, const float* x, int64_t r0, int64_t r1, float* y) {
  GemvRows(F16Row{w}, cols, x, r0, r1, y);
}
void GemvBF16(const uint16_t* w, int64_t cols, const float* x, int64_t r0, int64_t r1, float* y) {
  GemvRows(BF16Row{w}, cols, x, r0, r1, y);
}

// MLX rows. A vector of N U32 words holds N*E elements (E = 32/bits); shifting every lane by
// n*bits exposes element n of each word. So x is first rearranged (per block of N words) into E
// vectors, xp[n][i] = x[(block*N + i)*E + n]; then each shift-and-mask of the words multiplies
// one contiguous slice of xp. Every lane is one word, and a word never straddles two groups, so
// lane i takes the scale and bias of word i's group (a broadcast, or a lane shuffle). Up to kNT tokens share
// each unpacked weight vector; each (row, token) sum runs in the same order for any kNT.
template <int kBits>
struct MlxLayout {
  static constexpr int E = 32 / kBits;
  int64_t N, words_per_row, blocks, groups_per_row;
  int log2_group = 0;
  // Whether one block of N words lies inside a single group (then its scale is a broadcast);
  // otherwise lane i takes the group at offset lane_group[i] from the block's first group.
  bool block_in_one_group;
  int32_t lane_group[hn::MaxLanes(DF())];
  MlxLayout(const MlxRows& m, int64_t lanes)
      : N(lanes), words_per_row(m.cols / E), blocks(m.cols / E / lanes), groups_per_row(m.cols / m.group_size) {
    while ((1 << log2_group) < m.group_size) ++log2_group;
    block_in_one_group = N * E <= m.group_size;
    for (int64_t i = 0; i < N; ++i) lane_group[i] = static_cast<int32_t>((i * E) >> log2_group);
  }
  int64_t xp_size() const { return blocks * N * E; }
  int64_t xw_size() const { return blocks * N; }
};

template <int kBits, int kNT>
HWY_INLINE void MlxRowTokens(const MlxRows& m, const MlxLayout<kBits>& L, int64_t r, const float* const* x,
                             const float* const* xp, const float* const* xw, float* const* y) {
  constexpr int E = MlxLayout<kBits>::E;
  const DF df;
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const int64_t N = L.N;
  const auto mask = hn::Set(du, (1u << kBits) - 1u);
  const auto lane_group = hn::SetTableIndices(df, L.lane_group);
  const uint32_t* words = m.words + r * L.words_per_row;
  const float* scales = m.scales + r * L.groups_per_row;
  const float* biases = m.biases + r * L.groups_per_row;
  hn::Vec<DF> acc[kNT];
  for (int t = 0; t < kNT; ++t) acc[t] = hn::Zero(df);
  for (int64_t b = 0; b < L.blocks; ++b) {
    const auto w = hn::LoadU(du, words + b * N);
    hn::Vec<DF> dot[kNT];
    for (int t = 0; t < kNT; ++t) dot[t] = hn::Zero(df);
    for (int n = 0; n < E; ++n) {
      const auto q = hn::ConvertTo(df, hn::BitCast(di, hn::And(hn::ShiftRightSame(w, n * kBits), mask)));
      for (int t = 0; t < kNT; ++t) dot[t] = hn::MulAdd(q, hn::LoadU(df, xp[t] + (b * E + n) * N), dot[t]);
    }
    // Scales and biases are padded (weights.cpp), so a full-vector load past the row is safe.
    const int64_t g0 = (b * N * E) >> L.log2_group;
    const auto scale = L.block_in_one_group ? hn::Set(df, scales[g0])
                                            : hn::TableLookupLanes(hn::LoadU(df, scales + g0), lane_group);
    const auto bias = L.block_in_one_group ? hn::Set(df, biases[g0])
                                           : hn::TableLookupLanes(hn::LoadU(df, biases + g0), lane_group);
    for (int t = 0; t < kNT; ++t) {
      acc[t] = hn::MulAdd(scale, dot[t], acc[t]);
      acc[t] = hn::MulAdd(bias, hn::LoadU(df, xw[t] + b * N), acc[t]);
    }
  }
  for (int t = 0; t < kNT; ++t) {
    float sum = hn::GetLane(hn::SumOfLanes(df, acc[t]));
    for (int64_t j = L.blocks * N * E; j < m.cols; ++j) {
      const uint32_t q = (words[j / E] >> ((j % E) * kBits)) & ((1u << kBits) - 1u);
      const int64_t g = j / m.group_size;
      sum += (scales[g] * static_cast<float>(q) + biases[g]) * x[t][j];
    }
    *y[t] = sum;
  }
}

template <int kBits>
void GemmMlxT(const MlxRows& m, const float* x, int64_t n_tokens, int64_t r0, int64_t r1, float* y, int64_t y_stride) {
  constexpr int E = MlxLayout<kBits>::E;
  const MlxLayout<kBits> L(m, static_cast<int64_t>(hn::Lanes(DF())));
  // Per token: permuted x, and the sum of x over each word's elements (for the bias term).
  thread_local std::vector<float> xp, xw;
  xp.resize(static_cast<size_t>(n_tokens * L.xp_size()));
  xw.resize(static_cast<size_t>(n_tokens * L.xw_size()));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xt = x + t * m.cols;
    float* pt = xp.data() + t * L.xp_size();
    float* wt = xw.data() + t * L.xw_size();
    for (int64_t b = 0; b < L.blocks; ++b)
      for (int64_t i = 0; i < L.N; ++i) {
        float s = 0;
        for (int n = 0; n < E; ++n) {
          const float v = xt[(b * L.N + i) * E + n];
          pt[(b * E + n) * L.N + i] = v;
          s += v;
        }
        wt[b * L.N + i] = s;
      }
  }
  auto token_ptrs = [&](int64_t t, int64_t r, int k, const float** xs, const float** ps, const float** ws, float** ys) {
    for (int i = 0; i < k; ++i) {
      xs[i] = x + (t + i) * m.cols;
      ps[i] = xp.data() + (t + i) * L.xp_size();
      ws[i] = xw.data() + (t + i) * L.xw_size();
      ys[i] = y + (t + i) * y_stride + (r - r0);
    }
  };
  for (int64_t r = r0; r < r1; ++r) {
    const float* xs[4];
    const float* ps[4];
    const float* ws[4];
    float* ys[4];
    int64_t t = 0;
    for (; t + 4 <= n_tokens; t += 4) {
      token_ptrs(t, r, 4, xs, ps, ws, ys);
      MlxRowTokens<kBits, 4>(m, L, r, xs, ps, ws, ys);
    }
    for (; t < n_tokens; ++t) {
      token_ptrs(t, r, 1, xs, ps, ws, ys);
      MlxRowTokens<kBits, 1>(m, L, r, xs, ps, ws, ys);
    }
  }
}

void GemmMlx(const MlxRows& m, const float* x, int64_t n_tokens, int64_t r0, int64_t r1, float* y, int64_t y_stride) {
  if (m.bits == 4) GemmMlxT<4>(m, x, n_tokens, r0, r1, y, y_stride);
  else GemmMlxT<8>(m, x, n_tokens, r0, r1, y, y_stride);
}

// MXFP4 rows, widened to f32 in natural order. A block's 16 bytes are split into nibbles,
// interleaved back into element order (low nibble first), looked up as twice their e2m1 value
// (small integers: one byte shuffle against a 16-entry table) and scaled by half the block's
// power of two; every value is exact, so any later sum sees the same floats.
constexpr int8_t kTwiceE2m1[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// 2^(e - 127) / 2 for each e8m0 exponent (the table above doubled the codes).
const float* HalfBlockScales() {
  static const auto table = [] {
    std::array<float, 256> t{};
    for (int e = 0; e < 256; ++e) t[static_cast<size_t>(e)] = std::ldexp(1.0f, e - 128);
    return t;
  }();
  return table.data();
}

// twice[0..32) = the doubled values of one block's 16 code bytes, in element order.
HWY_INLINE void SplitMxfp4Block(const uint8_t* codes, int8_t* twice) {
#if HWY_TARGET == HWY_SCALAR
  for (int i = 0; i < 16; ++i) {
    twice[2 * i] = kTwiceE2m1[codes[i] & 0x0F];
    twice[2 * i + 1] = kTwiceE2m1[codes[i] >> 4];
  }
#else
  const hn::Full128<uint8_t> d16;
  const auto table = hn::LoadU(d16, reinterpret_cast<const uint8_t*>(kTwiceE2m1));
  const auto low = hn::Set(d16, uint8_t{0x0F});
  const auto bytes = hn::LoadU(d16, codes);
  const auto lo = hn::And(bytes, low), hi = hn::And(hn::ShiftRight<4>(bytes), low);
  hn::StoreU(hn::TableLookupBytes(table, hn::InterleaveLower(d16, lo, hi)), d16, reinterpret_cast<uint8_t*>(twice));
  hn::StoreU(hn::TableLookupBytes(table, hn::InterleaveUpper(d16, lo, hi)), d16, reinterpret_cast<uint8_t*>(twice + 16));
#endif
}

void DecodeMxfp4Rows(const Mxfp4Rows& m, int64_t r0, int64_t r1, float* out) {
  const DF df;
  const hn::Rebind<int8_t, DF> di8;
  const hn::Rebind<int32_t, DF> di32;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const float* scales = HalfBlockScales();
  const int64_t blocks = m.cols / 32;
  alignas(64) int8_t twice[32];  // one block's values, doubled
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* codes = m.codes + r * (m.cols / 2);
    const uint8_t* exponents = m.exponents + r * blocks;
    float* row = out + (r - r0) * m.cols;
    for (int64_t b = 0; b < blocks; ++b) {
      SplitMxfp4Block(codes + b * 16, twice);
      const float scale = scales[exponents[b]];
      float* o = row + b * 32;
      if (32 % N == 0) {
        const auto vscale = hn::Set(df, scale);
        for (int64_t j = 0; j < 32; j += N)
          hn::StoreU(hn::Mul(hn::ConvertTo(df, hn::PromoteTo(di32, hn::LoadU(di8, twice + j))), vscale), df, o + j);
      } else {
        for (int j = 0; j < 32; ++j) o[j] = static_cast<float>(twice[j]) * scale;
      }
    }
  }
}

// y[r - r0] = dot(row r, x): the rows widened in registers exactly as DecodeMxfp4Rows widens them,
// summed in DotWith's order, so the result equals GemvF32 (and GemmRowsF32) over widened rows.
void GemvMxfp4(const Mxfp4Rows& m, const float* x, int64_t r0, int64_t r1, float* y) {
  const DF df;
  const hn::Rebind<int8_t, DF> di8;
  const hn::Rebind<int32_t, DF> di32;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  if (32 % N != 0) {  // no such target on x86 or ARM today; keep the order by widening first
    thread_local std::vector<float> row;
    row.resize(static_cast<size_t>(m.cols));
    for (int64_t r = r0; r < r1; ++r) {
      DecodeMxfp4Rows(m, r, r + 1, row.data());
      y[r - r0] = DotWith(F32Row{row.data()}, x, m.cols);
    }
    return;
  }
  const float* scales = HalfBlockScales();
  const int64_t blocks = m.cols / 32;
  alignas(64) int8_t twice[32];
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* codes = m.codes + r * (m.cols / 2);
    const uint8_t* exponents = m.exponents + r * blocks;
    auto acc = hn::Zero(df);
    for (int64_t b = 0; b < blocks; ++b) {
      SplitMxfp4Block(codes + b * 16, twice);
      const auto scale = hn::Set(df, scales[exponents[b]]);
      for (int64_t j = 0; j < 32; j += N) {
        const auto w = hn::Mul(hn::ConvertTo(df, hn::PromoteTo(di32, hn::LoadU(di8, twice + j))), scale);
        acc = hn::MulAdd(w, hn::LoadU(df, x + b * 32 + j), acc);
      }
    }
    y[r - r0] = hn::GetLane(hn::SumOfLanes(df, acc));
  }
}

// A register tile: 4 weight rows against kT tokens per pass over the columns, so each loaded
// vector feeds several FMAs. kT is what the target's vector registers hold: 4 with 32 registers
// (AVX-512, NEON), 3 with 16 (AVX2, SSE4), where a 4x4 tile's 16 accumulators, 4 activations
// and a row would spill every step. Rows or tokens beyond the block are aliased to the first and
// dropped. Each (row, token) is one chain over the columns whatever the tile, so the tile shape
// changes no bit.
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3
constexpr int kTileTokens = 3;
#else
constexpr int kTileTokens = 4;
#endif

void GemmRowsF32(const float* rows, int n_rows, const float* x, int64_t n_tokens, int64_t cols, float* y,
                 int64_t y_stride) {
  constexpr int kT = kTileTokens;
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const float* w[4];
  for (int r = 0; r < 4; ++r) w[r] = rows + (r < n_rows ? r : 0) * cols;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kT) {
    const int nt = static_cast<int>(std::min<int64_t>(kT, n_tokens - t0));
    const float* xt[kT];
    for (int t = 0; t < kT; ++t) xt[t] = x + (t0 + (t < nt ? t : 0)) * cols;
    hn::Vec<DF> acc[4][kT];
    for (auto& row : acc)
      for (auto& a : row) a = hn::Zero(df);
    int64_t i = 0;
    for (; i + N <= cols; i += N) {
      hn::Vec<DF> xv[kT];
#pragma GCC unroll 4
      for (int t = 0; t < kT; ++t) xv[t] = hn::LoadU(df, xt[t] + i);
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {
        const auto wr = hn::LoadU(df, w[r] + i);
#pragma GCC unroll 4
        for (int t = 0; t < kT; ++t) acc[r][t] = hn::MulAdd(wr, xv[t], acc[r][t]);
      }
    }
    for (int r = 0; r < n_rows; ++r)
      for (int t = 0; t < nt; ++t) {
        float s = hn::GetLane(hn::SumOfLanes(df, acc[r][t]));
        for (int64_t j = i; j < cols; ++j) s += w[r][j] * xt[t][j];
        y[(t0 + t) * y_stride + r] = s;
      }
  }
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

// Independent FMA chains, enough to cover the FMA latency on current cores; returns the number of
// floating-point operations done (2 per lane per FMA). Each chain starts from its own value: chains
// that start equal compute equal values, and GCC kept one of them (a twelfth of the work, timed as
// if all twelve ran: the peak it reported was 1.5-3x the core's).
double FmaBurst(int64_t iterations, float* sink) {
  const DF df;
  auto a0 = hn::Set(df, 1.00f), a1 = hn::Set(df, 1.01f), a2 = hn::Set(df, 1.02f), a3 = hn::Set(df, 1.03f);
  auto a4 = hn::Set(df, 1.04f), a5 = hn::Set(df, 1.05f), a6 = hn::Set(df, 1.06f), a7 = hn::Set(df, 1.07f);
  auto a8 = hn::Set(df, 1.08f), a9 = hn::Set(df, 1.09f), a10 = hn::Set(df, 1.10f), a11 = hn::Set(df, 1.11f);
  const auto m = hn::Set(df, 0.999999f), c = hn::Set(df, 1e-7f);
  for (int64_t i = 0; i < iterations; ++i) {
    a0 = hn::MulAdd(a0, m, c); a1 = hn::MulAdd(a1, m, c); a2 = hn::MulAdd(a2, m, c); a3 = hn::MulAdd(a3, m, c);
    a4 = hn::MulAdd(a4, m, c); a5 = hn::MulAdd(a5, m, c); a6 = hn::MulAdd(a6, m, c); a7 = hn::MulAdd(a7, m, c);
    a8 = hn::MulAdd(a8, m, c); a9 = hn::MulAdd(a9, m, c); a10 = hn::MulAdd(a10, m, c); a11 = hn::MulAdd(a11, m, c);
  }
  auto sum = hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), hn::Add(hn::Add(a4, a5), hn::Add(a6, a7)));
  sum = hn::Add(sum, hn::Add(hn::Add(a8, a9), hn::Add(a10, a11)));
  *sink = hn::GetLane(hn::SumOfLanes(df, sum));
  return static_cast<double>(iterations) * 12.0 * 2.0 * static_cast<double>(hn::Lanes(df));
}

}  // namespace HWY_NAMESPACE
}  // namespace keel::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace keel::ops {

HWY_EXPORT(GemvF32);
HWY_EXPORT(DecodeMxfp4Rows);
HWY_EXPORT(GemvMxfp4);
HWY_EXPORT(GemvF16);
HWY_EXPORT(GemvBF16);
HWY_EXPORT(GemmMlx);
HWY_EXPORT(GemmRowsF32);
HWY_EXPORT(TargetName);
HWY_EXPORT(FmaBurst);

void gemv_f32(const float* w, int64_t cols, const float* x, int64_t r0, int64_t r1, float* y) {
  HWY_DYNAMIC_DISPATCH(GemvF32)(w, cols, x, r0, r1, y);
}
void gemv_f16(const uint16_t* w, int64_t cols, const float* x, int64_t r0, int64_t r1, float* y) {
  HWY_DYNAMIC_DISPATCH(GemvF16)(w, cols, x, r0, r1, y);
}
void gemv_bf16(const uint16_t* w, int64_t cols, const float* x, int64_t r0, int64_t r1, float* y) {
  HWY_DYNAMIC_DISPATCH(GemvBF16)(w, cols, x, r0, r1, y);
}
void gemm_mlx(const MlxRows& w, const float* x, int64_t n_tokens, int64_t r0, int64_t r1, float* y, int64_t y_stride) {
  HWY_DYNAMIC_DISPATCH(GemmMlx)(w, x, n_tokens, r0, r1, y, y_stride);
}
void gemv_mxfp4(const Mxfp4Rows& w, const float* x, int64_t r0, int64_t r1, float* y) {
  HWY_DYNAMIC_DISPATCH(GemvMxfp4)(w, x, r0, r1, y);
}
void decode_mxfp4_rows(const Mxfp4Rows& w, int64_t r0, int64_t r1, float* out) {
  HWY_DYNAMIC_DISPATCH(DecodeMxfp4Rows)(w, r0, r1, out);
}
void gemm_rows_f32(const float* rows, int n_rows, const float* x, int64_t n_tokens, int64_t cols, float* y,
                   int64_t y_stride) {
  HWY_DYNAMIC_DISPATCH(GemmRowsF32)(rows, n_rows, x, n_tokens, cols, y, y_stride);
}
const char* simd_target_name() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }
double fma_burst(int64_t iterations, float* sink) { return HWY_DYNAMIC_DISPATCH(FmaBurst)(iterations, sink); }

}  // namespace keel::ops
#endif
