// attend_spans: one online softmax over rows of any format. The loop is organised in fixed tiles of
// global row index so that the floating-point operations, and therefore the bits of the result,
// do not depend on where span boundaries fall (see kv_attention.h).
#include "keel/kv/kv_attention.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "keel/kv/kv_attention_kernels.h"
#include "keel/util/error.h"

namespace keel::kv {
namespace {

constexpr int64_t kTile = kernels::kExpTile;

void check_spans(int64_t dim, std::span<const KvSpan> spans) {
  if (dim <= 0) throw Error("attention over KV rows needs a positive head dim, got " + std::to_string(dim));
  for (const KvSpan& s : spans) {
    if (s.count < 0) throw Error("KV span with a negative row count");
    if (s.count == 0) continue;
    if (s.format != KvFormat::BF16 && dim % kKvQuantGroup != 0)
      throw Error("KV rows in " + std::string(kv_format_name(s.format)) + " need a head dim that is a multiple of " +
                  std::to_string(kKvQuantGroup) + ", got " + std::to_string(dim));
    if (s.k == nullptr || s.v == nullptr) throw Error("KV span without key or value rows");
  }
}

// A query's prepared forms and the value sum of the rows that see it.
struct QueryForm {
  std::vector<float> q;
  std::vector<int16_t> q16;
  std::vector<float> q_scale, q_sum;
  std::vector<float> acc;
  kernels::PreparedQuery view() const { return {q.data(), q16.data(), q_scale.data(), q_sum.data()}; }

  void prepare(const float* src, int64_t dim, bool rotate) {
    q.assign(src, src + dim);
    if (rotate) rotate_row(q.data(), dim);
    const int64_t groups = dim / kKvQuantGroup;
    q16.assign(static_cast<size_t>(dim), 0);
    q_scale.assign(static_cast<size_t>(groups), 0.0f);
    q_sum.assign(static_cast<size_t>(groups), 0.0f);
    if (groups > 0 && dim % kKvQuantGroup == 0) kernels::prepare_query(q.data(), dim, q16.data(), q_scale.data(), q_sum.data());
    acc.assign(static_cast<size_t>(dim), 0.0f);
  }
};

}  // namespace

void attend_spans(const float* q, int64_t dim, const ops::AttentionParams& params, std::span<const KvSpan> spans,
                  int64_t first_pos, float* out) {
  check_spans(dim, spans);
  if (first_pos < 0) throw Error("KV span rows at a negative position");
  int64_t rows = 0;
  for (const KvSpan& s : spans) rows += s.count;
  if (rows == 0) {
    std::fill(out, out + dim, 0.0f);
    return;
  }
  // The window is anchored at the query's global position, and so are the tiles below: which rows
  // the caller passes before the window changes nothing.
  const int64_t start = ops::first_attended_position(first_pos + rows - 1, params.window);

  // A cursor over the rows: span si, row row_in_span of it, at global position pos.
  size_t si = 0;
  int64_t row_in_span = 0, pos = first_pos;
  while (pos < start) {
    const int64_t skip = std::min(start - pos, spans[si].count - row_in_span);
    row_in_span += skip;
    pos += skip;
    if (row_in_span == spans[si].count) {
      ++si;
      row_in_span = 0;
    }
  }

  bool any_plain = false, any_rotated = false;
  for (size_t i = si; i < spans.size(); ++i) {
    if (spans[i].count > (i == si ? row_in_span : 0)) (spans[i].rotated ? any_rotated : any_plain) = true;
  }
  thread_local QueryForm plain, rotated;  // reused between calls: attention runs per (token, head)
  if (any_plain) plain.prepare(q, dim, false);
  if (any_rotated) rotated.prepare(q, dim, true);
  const kernels::PreparedQuery plain_q = plain.view(), rotated_q = rotated.view();

  struct Run {
    const KvSpan* span;
    int64_t first, count, tile_offset;
  };
  float scores[kTile];
  Run runs[kTile];
  // A sink starts the softmax as one term of its own, exp(sink - sink) = 1 with no value, so the
  // online rescaling below treats it like any row.
  float running_max = params.has_sink ? params.sink : -INFINITY;
  float running_sum = params.has_sink ? 1.0f : 0.0f;
  const bool softcap = params.softcap > 0.0f;

  while (true) {
    // Gather the next tile: the rows up to the next multiple of kTile positions, possibly from
    // several spans.
    const int64_t room = (pos / kTile + 1) * kTile - pos;
    int n = 0, n_runs = 0;
    while (n < room && si < spans.size()) {
      const KvSpan& s = spans[si];
      if (row_in_span == s.count) {
        ++si;
        row_in_span = 0;
        continue;
      }
      const int64_t take = std::min<int64_t>(room - n, s.count - row_in_span);
      runs[n_runs++] = {&s, row_in_span, take, n};
      kernels::score_rows(s.format, s.rotated ? rotated_q : plain_q, dim, s.k + static_cast<size_t>(row_in_span) * s.stride,
                          s.stride, take, scores + n);
      n += static_cast<int>(take);
      row_in_span += take;
    }
    if (n == 0) break;
    pos += n;

    float tile_max = -INFINITY;
    for (int i = 0; i < n; ++i) {
      scores[i] *= params.scale;
      if (softcap) scores[i] = params.softcap * std::tanh(scores[i] / params.softcap);
      tile_max = std::max(tile_max, scores[i]);
    }
    if (tile_max > running_max) {
      // Rescale what was summed so far to the new maximum (exp(-inf) = 0 on the first tile).
      const float factor = std::exp(running_max - tile_max);
      running_sum *= factor;
      if (any_plain)
        for (float& a : plain.acc) a *= factor;
      if (any_rotated)
        for (float& a : rotated.acc) a *= factor;
      running_max = tile_max;
    }
    kernels::exp_shifted(scores, n, running_max);
    for (int i = 0; i < n; ++i) running_sum += scores[i];
    for (int r = 0; r < n_runs; ++r) {
      const Run& run = runs[r];
      QueryForm& form = run.span->rotated ? rotated : plain;
      kernels::accumulate_rows(run.span->format, scores + run.tile_offset, dim,
                               run.span->v + static_cast<size_t>(run.first) * run.span->stride, run.span->stride,
                               run.count, form.acc.data());
    }
  }

  if (any_rotated) rotate_row(rotated.acc.data(), dim);  // back from the rotated basis, once
  const float inv = 1.0f / running_sum;
  for (int64_t d = 0; d < dim; ++d) {
    float sum = 0.0f;
    if (any_plain) sum += plain.acc[static_cast<size_t>(d)];
    if (any_rotated) sum += rotated.acc[static_cast<size_t>(d)];
    out[d] = sum * inv;
  }
}

}  // namespace keel::kv
