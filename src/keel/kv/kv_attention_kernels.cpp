// The tile loop of attend_spans, compiled by Highway once per SIMD target and chosen at run time
// (see keel/ops/simd_kernels.cpp). A tile's scores are kept with one lane per key position, so a
// query's dot products need no horizontal sums: each lane is one fused multiply-add chain over the
// head dim, the same chain whatever else is in the call.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "keel/kv/kv_attention_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "keel/kv/kv_attention_kernels.h"
#include "keel/kv/kv_format_layout.h"

HWY_BEFORE_NAMESPACE();
namespace keel::kv::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The loops over a block's queries and vectors have constant trip counts: unrolled even at -O2, so
// the accumulators stay in registers.
#define KEEL_UNROLL_BLOCK _Pragma("GCC unroll 8")

// Vectors per pass of the score and value loops for kQ queries at once (1, 2, 4 or 6): kQ * kV
// accumulators.
template <int kQ>
constexpr int kVectorsPerPass = kQ >= 4 ? 2 : 4;

// The most queries a block runs together. On the 16-register targets six by two vectors keep 12
// FMA chains in flight beside the two loaded vectors and a broadcast; four by two (8 chains) left
// the AVX2 kernel at ~55% of the FMA peak on Zen 4, and six run dim-64 tiles 7-12% faster. On the
// AVX-512 target the same six ran 10-40% slower than four (Zen 4): it keeps four.
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3
constexpr int kBlockQueries = 6;
#else
constexpr int kBlockQueries = 4;
#endif

// scores[i * kTile + j] = dot(q_i, key j) for kQ queries: per lane one FMA chain over d, the same
// whatever kQ, so a query's scores do not depend on its neighbours. Each key vector is loaded once
// for the kQ queries.
template <int kQ>
HWY_INLINE void ScoreQueries(const float* kt, int64_t dim, const float* const* q, float* scores) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  constexpr int kV = kVectorsPerPass<kQ>;
  static_assert(kTile % (kV * hn::MaxLanes(decltype(df)())) == 0, "a tile is whole passes on every target");
  for (int64_t c = 0; c < kTile; c += kV * N) {
    hn::Vec<decltype(df)> a[kQ][kV];
    KEEL_UNROLL_BLOCK
    for (int i = 0; i < kQ; ++i)
      KEEL_UNROLL_BLOCK
      for (int v = 0; v < kV; ++v) a[i][v] = hn::Zero(df);
    for (int64_t d = 0; d < dim; ++d) {
      hn::Vec<decltype(df)> k[kV];
      KEEL_UNROLL_BLOCK
      for (int v = 0; v < kV; ++v) k[v] = hn::LoadU(df, kt + d * kTile + c + v * N);
      KEEL_UNROLL_BLOCK
      for (int i = 0; i < kQ; ++i) {
        const auto qd = hn::Set(df, q[i][d]);
        KEEL_UNROLL_BLOCK
        for (int v = 0; v < kV; ++v) a[i][v] = hn::MulAdd(qd, k[v], a[i][v]);
      }
    }
    KEEL_UNROLL_BLOCK
    for (int i = 0; i < kQ; ++i)
      KEEL_UNROLL_BLOCK
      for (int v = 0; v < kV; ++v) hn::StoreU(a[i][v], df, scores + i * kTile + c + v * N);
  }
}

// Scores -> softmax numerators on the query's lanes (0 elsewhere); returns the factor its sums so
// far must be multiplied by.
HWY_INLINE float SoftmaxStep(float* s, const TileQuery& q, float scale, float softcap) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int64_t c0 = q.lo / N * N;  // whole vectors covering [lo, hi)
  // lanes in [lo, hi): lane > lo - 1 and lane < hi
  const auto vlo = hn::Set(di, static_cast<int32_t>(q.lo - 1)), vhi = hn::Set(di, static_cast<int32_t>(q.hi));
  const auto neg_inf = hn::Set(df, -INFINITY);
  // Masking whole vectors of valid lanes would change nothing: skip it.
  const bool partial = q.lo % N != 0 || q.hi % N != 0;
  auto valid_at = [&](int64_t c) {
    const auto lane = hn::Iota(di, static_cast<int32_t>(c));
    return hn::RebindMask(df, hn::And(hn::Gt(lane, vlo), hn::Lt(lane, vhi)));
  };
  auto vmax = neg_inf;
  for (int64_t c = c0; c < q.hi; c += N) {
    auto x = hn::Mul(hn::LoadU(df, s + c), hn::Set(df, scale));
    if (softcap > 0.0f) x = hn::Mul(hn::Set(df, softcap), hn::Tanh(df, hn::Div(x, hn::Set(df, softcap))));
    if (partial) x = hn::IfThenElse(valid_at(c), x, neg_inf);
    hn::StoreU(x, df, s + c);
    vmax = hn::Max(vmax, x);
  }
  const float tile_max = hn::GetLane(hn::MaxOfLanes(df, vmax));
  float factor = 1.0f;
  if (tile_max > *q.running_max) {
    factor = std::exp(*q.running_max - tile_max);  // 0 on the first tile (exp(-inf))
    *q.running_max = tile_max;
  }
  const auto vm = hn::Set(df, *q.running_max);
  auto vsum = hn::Zero(df);
  for (int64_t c = c0; c < q.hi; c += N) {
    auto e = hn::Exp(df, hn::Sub(hn::LoadU(df, s + c), vm));
    if (partial) e = hn::IfThenElseZero(valid_at(c), e);
    hn::StoreU(e, df, s + c);
    vsum = hn::Add(vsum, e);
  }
  *q.running_sum = *q.running_sum * factor + hn::GetLane(hn::SumOfLanes(df, vsum));
  return factor;
}

// acc_i = acc_i * factor_i + sum over lanes j in [from, to) of p_i[j] * value j, j in order, for
// kQ queries that read the same lanes. Each element's chain is the same whatever kQ (vector lanes
// by MulAdd, the dims past the last whole vector by std::fma), so a query's sums do not depend on
// its neighbours; factor 1 is exact. Each value vector is loaded once for the kQ queries.
template <int kQ>
HWY_INLINE void AccumulateRange(const float* vt, int64_t dim, const float* const* p, int64_t from, int64_t to,
                                const float* factor, float* const* acc) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  constexpr int kV = kVectorsPerPass<kQ>;
  int64_t d = 0;
  for (; d + kV * N <= dim; d += kV * N) {
    hn::Vec<decltype(df)> a[kQ][kV];
    KEEL_UNROLL_BLOCK
    for (int i = 0; i < kQ; ++i)
      KEEL_UNROLL_BLOCK
      for (int v = 0; v < kV; ++v) a[i][v] = hn::Mul(hn::LoadU(df, acc[i] + d + v * N), hn::Set(df, factor[i]));
    for (int64_t j = from; j < to; ++j) {
      const float* row = vt + j * dim + d;
      hn::Vec<decltype(df)> r[kV];
      KEEL_UNROLL_BLOCK
      for (int v = 0; v < kV; ++v) r[v] = hn::LoadU(df, row + v * N);
      KEEL_UNROLL_BLOCK
      for (int i = 0; i < kQ; ++i) {
        const auto w = hn::Set(df, p[i][j]);
        KEEL_UNROLL_BLOCK
        for (int v = 0; v < kV; ++v) a[i][v] = hn::MulAdd(w, r[v], a[i][v]);
      }
    }
    KEEL_UNROLL_BLOCK
    for (int i = 0; i < kQ; ++i)
      KEEL_UNROLL_BLOCK
      for (int v = 0; v < kV; ++v) hn::StoreU(a[i][v], df, acc[i] + d + v * N);
  }
  for (int i = 0; i < kQ; ++i) {
    int64_t e = d;
    for (; e + N <= dim; e += N) {
      auto a = hn::Mul(hn::LoadU(df, acc[i] + e), hn::Set(df, factor[i]));
      for (int64_t j = from; j < to; ++j) a = hn::MulAdd(hn::Set(df, p[i][j]), hn::LoadU(df, vt + j * dim + e), a);
      hn::StoreU(a, df, acc[i] + e);
    }
    for (; e < dim; ++e) {
      float a = acc[i][e] * factor[i];
      for (int64_t j = from; j < to; ++j) a = std::fma(p[i][j], vt[j * dim + e], a);
      acc[i][e] = a;
    }
  }
}

// For kQ queries that read the same lanes [lo, hi) of the tile (q[0]'s): each accumulator is
// rescaled exactly once per tile (fused into its first run, alone when none of its lanes is read),
// then takes its runs' lanes in order: the same operations however the tile's rows are split
// between the two bases, and whatever kQ.
template <int kQ>
HWY_INLINE void AccumulateStep(const float* vt, int64_t dim, const float* const* p, const LaneRun* runs,
                               int64_t n_runs, const TileQuery* q, const float* factor) {
  float* acc[kQ];
  float* acc_rot[kQ];
  float ones[kQ];
  for (int i = 0; i < kQ; ++i) {
    acc[i] = q[i].acc;
    acc_rot[i] = q[i].acc_rot;
    ones[i] = 1.0f;
  }
  bool plain_done = false, rotated_done = false;
  for (int64_t r = 0; r < n_runs; ++r) {
    const int64_t from = std::max(runs[r].lo, q[0].lo), to = std::min(runs[r].hi, q[0].hi);
    if (from >= to) continue;
    bool& done = runs[r].rotated ? rotated_done : plain_done;
    AccumulateRange<kQ>(vt, dim, p, from, to, done ? ones : factor, runs[r].rotated ? acc_rot : acc);
    done = true;
  }
  for (int i = 0; i < kQ; ++i) {
    if (factor[i] == 1.0f) continue;
    if (!plain_done) AccumulateRange<1>(vt, dim, &p[i], 0, 0, &factor[i], &acc[i]);
    if (acc_rot[i] != nullptr && !rotated_done) AccumulateRange<1>(vt, dim, &p[i], 0, 0, &factor[i], &acc_rot[i]);
  }
}

void UnrotateKeys(float* kt, int64_t dim) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int64_t block = dim & -dim;  // as rotate_row: the largest power of two dividing dim
  const auto norm = hn::Set(df, static_cast<float>(1.0 / std::sqrt(static_cast<double>(block))));
  for (int64_t b0 = 0; b0 < dim; b0 += block) {
    for (int64_t h = 1; h < block; h *= 2)
      for (int64_t i = b0; i < b0 + block; i += 2 * h)
        for (int64_t j = i; j < i + h; ++j) {
          float* x = kt + j * kTile;
          float* y = kt + (j + h) * kTile;
          for (int64_t c = 0; c < kTile; c += N) {
            const auto a = hn::LoadU(df, x + c), b = hn::LoadU(df, y + c);
            hn::StoreU(hn::Add(a, b), df, x + c);
            hn::StoreU(hn::Sub(a, b), df, y + c);
          }
        }
    for (int64_t d = b0; d < b0 + block; ++d)
      for (int64_t c = 0; c < kTile; c += N) hn::StoreU(hn::Mul(hn::LoadU(df, kt + d * kTile + c), norm), df, kt + d * kTile + c);
  }
}

// Queries i0 .. i0 + kQ of a block: scores, softmax steps, and (when they read the same lanes, as
// every query of a block does but at the causal diagonal) their value sums together.
template <int kQ>
HWY_INLINE void AttendQueries(const float* kt, const float* vt, int64_t dim, const LaneRun* runs, int64_t n_runs,
                              const TileQuery* q, float scale, float softcap, float* scores) {
  const float* qv[kQ];
  float* p[kQ];
  float factor[kQ];
  for (int i = 0; i < kQ; ++i) {
    qv[i] = q[i].q;
    p[i] = scores + i * kTile;
  }
  ScoreQueries<kQ>(kt, dim, qv, scores);
  bool same_lanes = true;
  for (int i = 0; i < kQ; ++i) {
    factor[i] = SoftmaxStep(p[i], q[i], scale, softcap);
    same_lanes = same_lanes && q[i].lo == q[0].lo && q[i].hi == q[0].hi;
  }
  if (same_lanes) {
    AccumulateStep<kQ>(vt, dim, p, runs, n_runs, q, factor);
    return;
  }
  for (int i = 0; i < kQ; ++i) AccumulateStep<1>(vt, dim, &p[i], runs, n_runs, &q[i], &factor[i]);
}

void AttendTile(const float* kt, const float* vt, int64_t dim, const LaneRun* runs, int64_t n_runs,
                const TileQuery* queries, int64_t n_queries, float scale, float softcap, float* scores) {
  int64_t i = 0;
  if constexpr (kBlockQueries == 6)
    for (; i + 6 <= n_queries; i += 6) AttendQueries<6>(kt, vt, dim, runs, n_runs, queries + i, scale, softcap, scores);
  for (; i + 4 <= n_queries; i += 4) AttendQueries<4>(kt, vt, dim, runs, n_runs, queries + i, scale, softcap, scores);
  if (i + 2 <= n_queries) {
    AttendQueries<2>(kt, vt, dim, runs, n_runs, queries + i, scale, softcap, scores);
    i += 2;
  }
  if (i < n_queries) AttendQueries<1>(kt, vt, dim, runs, n_runs, queries + i, scale, softcap, scores);
}

// Keys are transposed two dims at a time, as 32-bit bf16 pairs (dim d in the low half, d + 1 in
// the high half). On x86 from AVX2 up, eight rows' pairs are loaded four at a time and transposed
// with interleaves, a 4 x 4 transpose in each 128-bit block of a 256-bit vector (rows r .. r + 3
// in the lower block, r + 4 .. r + 7 in the upper): a gather of eight lanes costs more than the
// transposition. Elsewhere (and for the dims past a multiple of 8) a vector of rows is gathered
// per pair.
template <class D>
HWY_INLINE void StorePair(D di, hn::Vec<D> pair, int64_t d, int64_t r, float* kt) {
  const hn::Rebind<float, D> df;
  hn::StoreU(hn::BitCast(df, hn::ShiftLeft<16>(pair)), df, kt + d * kTile + r);
  hn::StoreU(hn::BitCast(df, hn::And(pair, hn::Set(di, static_cast<int32_t>(0xFFFF0000u)))), df, kt + (d + 1) * kTile + r);
}

void WidenBf16Keys(const uint8_t* rows, size_t stride, int64_t n, int64_t dim, float* kt) {
  const hn::ScalableTag<int32_t> di;
  const int64_t N = static_cast<int64_t>(hn::Lanes(di));
  const auto offsets = hn::Mul(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(stride)));
  int64_t r = 0;
  for (; r + N <= n && dim % 2 == 0; r += N) {
    const uint8_t* base = rows + static_cast<size_t>(r) * stride;
    int64_t d = 0;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
    const hn::CappedTag<int32_t, 8> d8;  // 256 bits
    const hn::Half<decltype(d8)> d4;
    const hn::Repartition<int64_t, decltype(d8)> d64;
    if (N % 8 == 0) {
      for (; d + 8 <= dim; d += 8)
        for (int64_t g = 0; g < N; g += 8) {
          auto two_rows = [&](int64_t i) {  // row g + i's four pairs low, row g + i + 4's high
            return hn::Combine(d8, hn::LoadU(d4, reinterpret_cast<const int32_t*>(base + (g + i + 4) * stride + 2 * d)),
                               hn::LoadU(d4, reinterpret_cast<const int32_t*>(base + (g + i) * stride + 2 * d)));
          };
          const auto v0 = two_rows(0), v1 = two_rows(1), v2 = two_rows(2), v3 = two_rows(3);
          const auto t0 = hn::BitCast(d64, hn::InterleaveLower(d8, v0, v1));  // pairs 0, 1 of rows 0, 1
          const auto t1 = hn::BitCast(d64, hn::InterleaveUpper(d8, v0, v1));  // pairs 2, 3
          const auto t2 = hn::BitCast(d64, hn::InterleaveLower(d8, v2, v3));
          const auto t3 = hn::BitCast(d64, hn::InterleaveUpper(d8, v2, v3));
          StorePair(d8, hn::BitCast(d8, hn::InterleaveLower(d64, t0, t2)), d, r + g, kt);
          StorePair(d8, hn::BitCast(d8, hn::InterleaveUpper(d64, t0, t2)), d + 2, r + g, kt);
          StorePair(d8, hn::BitCast(d8, hn::InterleaveLower(d64, t1, t3)), d + 4, r + g, kt);
          StorePair(d8, hn::BitCast(d8, hn::InterleaveUpper(d64, t1, t3)), d + 6, r + g, kt);
        }
    }
#endif
    for (; d < dim; d += 2)
      StorePair(di, hn::GatherOffset(di, reinterpret_cast<const int32_t*>(base + 2 * d), offsets), d, r, kt);
  }
  for (; r < n; ++r) {
    const uint8_t* row = rows + static_cast<size_t>(r) * stride;
    for (int64_t d = 0; d < dim; ++d) {
      uint16_t bits;
      std::memcpy(&bits, row + 2 * d, 2);
      const uint32_t wide = static_cast<uint32_t>(bits) << 16;
      std::memcpy(kt + d * kTile + r, &wide, 4);
    }
  }
}

void WidenBf16Values(const uint8_t* rows, size_t stride, int64_t n, int64_t dim, float* vt) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du32;
  const hn::Rebind<uint16_t, decltype(df)> du16;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  for (int64_t r = 0; r < n; ++r) {
    const auto* row = reinterpret_cast<const uint16_t*>(rows + static_cast<size_t>(r) * stride);
    float* out = vt + r * dim;
    int64_t d = 0;
    for (; d + N <= dim; d += N)
      hn::StoreU(hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, row + d)))), df, out + d);
    for (; d < dim; ++d) {
      uint16_t bits;
      std::memcpy(&bits, row + d, 2);
      const uint32_t wide = static_cast<uint32_t>(bits) << 16;
      std::memcpy(out + d, &wide, 4);
    }
  }
}

HWY_INLINE float LoadBf16(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &wide, 4);
  return f;
}

void WidenQuantizedRow(KvFormat format, const uint8_t* row, int64_t dim, float* out) {
  constexpr int64_t kGroup = kKvQuantGroup;
  const int64_t groups = dim / kGroup;
  if (format == KvFormat::Int8) {
    const hn::CappedTag<float, kGroup> df;
    const hn::Rebind<int32_t, decltype(df)> di32;
    const hn::Rebind<int8_t, decltype(df)> di8;
    const int64_t N = static_cast<int64_t>(hn::Lanes(df));
    const uint8_t* meta = row + layout::meta_offset(format, dim);
    for (int64_t g = 0; g < groups; ++g) {
      const auto s = hn::Set(df, LoadBf16(meta + 2 * g));
      for (int64_t i = 0; i < kGroup; i += N) {
        const auto c = hn::PromoteTo(di32, hn::LoadU(di8, reinterpret_cast<const int8_t*>(row) + g * kGroup + i));
        hn::StoreU(hn::Mul(s, hn::ConvertTo(df, c)), df, out + g * kGroup + i);
      }
    }
    return;
  }
  // Affine: x = m + s c. int4: byte j of a group holds codes j and j + 16; int2: codes j, j + 8,
  // j + 16 and j + 24 at bits 0, 2, 4, 6.
  const int bits = format == KvFormat::Int4 ? 4 : 2;
  const int64_t per = kGroup * bits / 8;  // code bytes per group: 16 or 8
  const hn::CappedTag<float, 8> df;      // at most 8 lanes: a group's int2 bytes
  const hn::Rebind<int32_t, decltype(df)> di32;
  const hn::Rebind<uint8_t, decltype(df)> du8;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto mask = hn::Set(di32, (1 << bits) - 1);
  const uint8_t* meta = row + layout::meta_offset(format, dim);
  for (int64_t g = 0; g < groups; ++g) {
    const auto s = hn::Set(df, LoadBf16(meta + 4 * g)), m = hn::Set(df, LoadBf16(meta + 4 * g + 2));
    const uint8_t* codes = row + g * per;
    float* o = out + g * kGroup;
    for (int64_t j = 0; j < per; j += N) {
      const auto b = hn::PromoteTo(di32, hn::LoadU(du8, codes + j));
      for (int shift = 0, k = 0; shift < 8; shift += bits, ++k) {
        const auto c = hn::And(hn::ShiftRightSame(b, shift), mask);
        hn::StoreU(hn::MulAdd(s, hn::ConvertTo(df, c), m), df, o + k * per + j);
      }
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace keel::kv::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace keel::kv::kernels {

HWY_EXPORT(AttendTile);
HWY_EXPORT(UnrotateKeys);
HWY_EXPORT(WidenQuantizedRow);

void widen_quantized_row(KvFormat format, const uint8_t* row, int64_t dim, float* out) {
  HWY_DYNAMIC_DISPATCH(WidenQuantizedRow)(format, row, dim, out);
}
HWY_EXPORT(WidenBf16Keys);
HWY_EXPORT(WidenBf16Values);

void widen_bf16_keys(const uint8_t* rows, size_t stride, int64_t n, int64_t dim, float* kt) {
  HWY_DYNAMIC_DISPATCH(WidenBf16Keys)(rows, stride, n, dim, kt);
}

void widen_bf16_values(const uint8_t* rows, size_t stride, int64_t n, int64_t dim, float* vt) {
  HWY_DYNAMIC_DISPATCH(WidenBf16Values)(rows, stride, n, dim, vt);
}

void attend_tile(const float* kt, const float* vt, int64_t dim, const LaneRun* runs, int64_t n_runs,
                 const TileQuery* queries, int64_t n_queries, float scale, float softcap, float* scores) {
  HWY_DYNAMIC_DISPATCH(AttendTile)(kt, vt, dim, runs, n_runs, queries, n_queries, scale, softcap, scores);
}

void unrotate_keys(float* kt, int64_t dim) { HWY_DYNAMIC_DISPATCH(UnrotateKeys)(kt, dim); }

}  // namespace keel::kv::kernels
#endif
