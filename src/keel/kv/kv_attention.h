#pragma once
// Attention of query heads over cached rows stored in any mix of KV formats (kv_format.h), tiled:
// blocks of queries against tiles of 64 keys with an online softmax (the flash-attention
// structure). No pass dequantizes a whole span into a buffer: one tile at a time, in per-thread
// scratch. Pure function of its arguments: any thread.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "keel/kv/kv_format.h"
#include "keel/ops/attention_params.h"

namespace keel::kv {

// How a span's values are stored when not like its keys.
struct KvValueForm {
  KvFormat format;
  bool rotated;
  size_t stride;
};

// `count` consecutive rows of one (layer, kv head): row i's key at k + i*stride, value at
// v + i*stride, both encoded in `format` (rotated: encoded with rotate = true). With `values` set,
// the values are in that form instead (a layer-aware KV policy keeps an early layer's keys more
// precise than its values): value i at v + i * values->stride.
struct KvSpan {
  KvFormat format;
  bool rotated;
  const uint8_t* k;
  const uint8_t* v;
  int64_t count;
  size_t stride;
  std::optional<KvValueForm> values = std::nullopt;

  KvFormat value_format() const { return values ? values->format : format; }
  bool value_rotated() const { return values ? values->rotated : rotated; }
  size_t value_stride() const { return values ? values->stride : stride; }
};

// Attention of several queries over the rows of all spans, in order, with one online softmax per
// query. The rows are positions [first_pos, first_pos + rows) of one sequence; query i sits at
// queries[i].pos inside that range and reads the positions from
// ops::first_attended_position(pos, window) to its own (rows before the window are skipped, so a
// caller may pass spans that start before it):
//   score_j = scale * q.k_j, then softcap * tanh(score_j / softcap) when softcap > 0
//   out[dim] = sum_j exp(score_j) v_j / (sum_j exp(score_j) + (has_sink ? exp(sink) : 0))
// The sink (the query's own) is a logit with no value: it only takes weight away from the rows.
// Rows of any format are widened to f32 (quantized ones decoded, rotated ones rotated back) once per
// tile of positions [64t, 64t + 64) and shared by every query that reads the tile: the query heads
// of a KV group and the rows of a prefill chunk read each K/V tile once.
// No rows at all (or none in a query's window) gives zeros. Bad arguments (dim not valid for a
// span's format, negative count or first_pos, a query outside the rows) throw keel::Error.
//
// Deterministic and split-invariant: a query's result depends only on q, its position and sink,
// params and the rows it reads (their positions, bytes, format and rotation), never on the other
// queries of the call, on threads, on how the rows are cut into spans or on how many rows before its
// window are passed. Tiles are fixed in global position, so the same rows in different spans give
// bit-identical output; the prefix cache, chunked prefill, batching and sliding-window layers that
// keep only their window rely on this. (Bits may differ between CPUs with different SIMD widths.)
void attend_spans(int64_t dim, const ops::AttentionParams& params, std::span<const KvSpan> spans, int64_t first_pos,
                  std::span<const ops::AttentionQuery> queries);

// One query at the last row's position, with params.sink as its sink.
void attend_spans(const float* q, int64_t dim, const ops::AttentionParams& params, std::span<const KvSpan> spans,
                  int64_t first_pos, float* out);

}  // namespace keel::kv
