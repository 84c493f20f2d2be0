// attend_spans: tiles of 64 key positions, fixed in global position, widened to f32 once and read by
// every query of the call that sees them; one online softmax per query. See kv_attention.h for why
// the tiles are global and what stays bit-identical.
#include "keel/kv/kv_attention.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "keel/kv/kv_attention_kernels.h"
#include "keel/kv/kv_format_layout.h"
#include "keel/util/error.h"
#include "keel/util/half.h"

namespace keel::kv {
namespace {

constexpr int64_t kTile = kernels::kTile;

void check_spans(int64_t dim, std::span<const KvSpan> spans, int64_t first_pos) {
  if (dim <= 0) throw Error("attention over KV rows needs a positive head dim, got " + std::to_string(dim));
  if (first_pos < 0) throw Error("KV span rows at a negative position");
  for (const KvSpan& s : spans) {
    if (s.count < 0) throw Error("KV span with a negative row count");
    if (s.count == 0) continue;
    for (KvFormat f : {s.format, s.value_format()})
      if (f != KvFormat::BF16 && dim % kKvQuantGroup != 0)
        throw Error("KV rows in " + std::string(kv_format_name(f)) + " need a head dim that is a multiple of " +
                    std::to_string(kKvQuantGroup) + ", got " + std::to_string(dim));
    if (s.k == nullptr || s.v == nullptr) throw Error("KV span without key or value rows");
  }
}

// Per-thread scratch of one call: the tile (keys transposed, values as rows) and the queries' state.
struct TileScratch {
  std::vector<float> kt;       // (dim, kTile) keys: kt[d * kTile + lane], in the model's basis
  std::vector<float> vt;       // (kTile, dim) values; those of rotated rows still rotated
  std::vector<float> row;      // (dim) one decoded key row
  std::vector<float> scores;   // (kernels::kScoreRows, kTile)
  std::vector<float> acc;      // (queries, dim) value sums over plain rows
  std::vector<float> acc_rot;  // (queries, dim) value sums over rotated rows, in the rotated basis
  std::vector<float> max, sum;
  std::vector<int64_t> start;  // each query's first attended position
  std::vector<bool> any;       // whether it read any row
  std::vector<kernels::TileQuery> active;
  struct Run {
    const KvSpan* span;
    int64_t row, n, lane;
  };
  std::vector<Run> runs;                  // the tile's rows, by span
  std::vector<kernels::LaneRun> lane_runs;  // and which of its lanes hold rotated values
};

// Widens the keys of `n` rows of span s from row `row` into lanes [lane, lane + n) of the tile.
// Rotated keys are decoded in their rotated basis; the caller un-rotates the whole tile at once.
void widen_keys(const KvSpan& s, int64_t row, int64_t n, int64_t dim, int64_t lane, TileScratch& t) {
  if (s.format == KvFormat::BF16 && !s.rotated) {
    kernels::widen_bf16_keys(s.k + static_cast<size_t>(row) * s.stride, s.stride, n, dim, t.kt.data() + lane);
    return;
  }
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* k = s.k + static_cast<size_t>(row + r) * s.stride;
    float* kt = t.kt.data() + lane + r;
    if (s.format == KvFormat::BF16)  // rotated bf16 rows (allowed, unusual)
      decode_kv_row(s.format, k, dim, /*rotate=*/false, t.row.data());
    else
      kernels::widen_quantized_row(s.format, k, dim, t.row.data());
    for (int64_t d = 0; d < dim; ++d) kt[d * kTile] = t.row[static_cast<size_t>(d)];
  }
}

// The same for the values, which stay in their own basis (rotated ones are summed apart).
void widen_values(const KvSpan& s, int64_t row, int64_t n, int64_t dim, int64_t lane, TileScratch& t) {
  const KvFormat format = s.value_format();
  const size_t stride = s.value_stride();
  if (format == KvFormat::BF16 && !s.value_rotated()) {
    kernels::widen_bf16_values(s.v + static_cast<size_t>(row) * stride, stride, n, dim, t.vt.data() + lane * dim);
    return;
  }
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* v = s.v + static_cast<size_t>(row + r) * stride;
    float* vt = t.vt.data() + (lane + r) * dim;
    if (format == KvFormat::BF16)
      decode_kv_row(format, v, dim, /*rotate=*/false, vt);
    else
      kernels::widen_quantized_row(format, v, dim, vt);
  }
}

// Fills the tile from t.runs: rotated keys first, which are then un-rotated together (the
// butterflies run over every lane), then the plain keys over them, then the values.
void widen_tile(int64_t dim, TileScratch& t) {
  t.lane_runs.clear();
  bool any_rotated = false;
  for (const TileScratch::Run& r : t.runs) {
    t.lane_runs.push_back({r.lane, r.lane + r.n, r.span->value_rotated()});
    if (r.span->rotated) {
      widen_keys(*r.span, r.row, r.n, dim, r.lane, t);
      any_rotated = true;
    }
  }
  if (any_rotated) kernels::unrotate_keys(t.kt.data(), dim);
  for (const TileScratch::Run& r : t.runs) {
    if (!r.span->rotated) widen_keys(*r.span, r.row, r.n, dim, r.lane, t);
    widen_values(*r.span, r.row, r.n, dim, r.lane, t);
  }
}

}  // namespace

void attend_spans(int64_t dim, const ops::AttentionParams& params, std::span<const KvSpan> spans, int64_t first_pos,
                  std::span<const ops::AttentionQuery> queries) {
  check_spans(dim, spans, first_pos);
  int64_t rows = 0;
  for (const KvSpan& s : spans) rows += s.count;
  const int64_t last_pos = first_pos + rows - 1;
  const auto nq = static_cast<int64_t>(queries.size());
  if (nq == 0) return;

  thread_local TileScratch t;  // attention runs per (row block, KV head): keep the allocations
  t.kt.resize(static_cast<size_t>(dim * kTile));
  t.vt.resize(static_cast<size_t>(kTile * dim));
  t.row.resize(static_cast<size_t>(dim));
  t.scores.resize(static_cast<size_t>(kernels::kScoreRows * kTile));
  t.acc.assign(static_cast<size_t>(nq * dim), 0.0f);
  bool any_rotated = false;
  for (const KvSpan& sp : spans) any_rotated |= sp.value_rotated() && sp.count > 0;
  t.acc_rot.assign(any_rotated ? static_cast<size_t>(nq * dim) : 0, 0.0f);
  t.max.resize(static_cast<size_t>(nq));
  t.sum.resize(static_cast<size_t>(nq));
  t.start.resize(static_cast<size_t>(nq));
  t.any.assign(static_cast<size_t>(nq), false);

  // The positions some query reads: [lo, hi].
  int64_t lo = INT64_MAX, hi = -1;
  for (int64_t i = 0; i < nq; ++i) {
    const ops::AttentionQuery& q = queries[static_cast<size_t>(i)];
    if (rows > 0 && (q.pos < first_pos || q.pos > last_pos))
      throw Error("attention query at position " + std::to_string(q.pos) + " outside the KV rows at " +
                  std::to_string(first_pos) + ".." + std::to_string(last_pos));
    // A sink starts the softmax as one term of its own, exp(sink - sink) = 1 with no value, so the
    // online rescaling treats it like any row.
    t.max[static_cast<size_t>(i)] = params.has_sink ? q.sink : -INFINITY;
    t.sum[static_cast<size_t>(i)] = params.has_sink ? 1.0f : 0.0f;
    t.start[static_cast<size_t>(i)] = std::max(ops::first_attended_position(q.pos, params.window), first_pos);
    lo = std::min(lo, t.start[static_cast<size_t>(i)]);
    hi = std::max(hi, q.pos);
  }

  // A cursor over the rows: span si, row row_in_span of it, at global position pos.
  size_t si = 0;
  int64_t row_in_span = 0, pos = first_pos;
  auto advance = [&](int64_t to, bool widen, int64_t tile_base) {
    t.runs.clear();
    while (pos < to) {
      const KvSpan& s = spans[si];
      if (row_in_span == s.count) {
        ++si;
        row_in_span = 0;
        continue;
      }
      const int64_t take = std::min(to - pos, s.count - row_in_span);
      if (widen) t.runs.push_back({&s, row_in_span, take, pos - tile_base});
      row_in_span += take;
      pos += take;
    }
  };
  if (rows > 0) advance(lo, false, 0);

  while (rows > 0 && pos <= hi) {
    const int64_t tile_base = pos / kTile * kTile;
    const int64_t tile_end = std::min(tile_base + kTile, hi + 1);  // positions [pos, tile_end) this round
    t.active.clear();
    for (int64_t i = 0; i < nq; ++i) {
      const auto u = static_cast<size_t>(i);
      if (t.start[u] >= tile_end || queries[u].pos < pos) continue;
      t.active.push_back({.q = queries[u].q,
                          .lo = std::max(t.start[u], pos) - tile_base,
                          .hi = std::min(queries[u].pos, tile_end - 1) - tile_base + 1,
                          .running_max = &t.max[u],
                          .running_sum = &t.sum[u],
                          .acc = t.acc.data() + i * dim,
                          .acc_rot = any_rotated ? t.acc_rot.data() + i * dim : nullptr});
      t.any[u] = true;
    }
    if (t.active.empty()) {
      advance(tile_end, false, tile_base);
      continue;
    }
    advance(tile_end, true, tile_base);
    widen_tile(dim, t);
    kernels::attend_tile(t.kt.data(), t.vt.data(), dim, t.lane_runs.data(), static_cast<int64_t>(t.lane_runs.size()),
                         t.active.data(), static_cast<int64_t>(t.active.size()), params.scale, params.softcap,
                         t.scores.data());
  }

  for (int64_t i = 0; i < nq; ++i) {
    float* out = queries[static_cast<size_t>(i)].out;
    if (!t.any[static_cast<size_t>(i)]) {
      std::fill(out, out + dim, 0.0f);
      continue;
    }
    const float inv = 1.0f / t.sum[static_cast<size_t>(i)];
    float* acc = t.acc.data() + i * dim;
    if (any_rotated) {  // the rotated rows' value sum, back from the rotated basis once
      float* acc_rot = t.acc_rot.data() + i * dim;
      rotate_row(acc_rot, dim);
      for (int64_t d = 0; d < dim; ++d) acc[d] += acc_rot[d];
    }
    for (int64_t d = 0; d < dim; ++d) out[d] = acc[d] * inv;
  }
}

void attend_spans(const float* q, int64_t dim, const ops::AttentionParams& params, std::span<const KvSpan> spans,
                  int64_t first_pos, float* out) {
  int64_t rows = 0;
  for (const KvSpan& s : spans) rows += std::max<int64_t>(s.count, 0);
  const ops::AttentionQuery query{.q = q, .pos = first_pos + std::max<int64_t>(rows - 1, 0), .sink = params.sink, .out = out};
  attend_spans(dim, params, spans, first_pos, std::span(&query, 1));
}

}  // namespace keel::kv
