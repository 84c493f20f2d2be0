#pragma once
// Attention of one query head over cached rows stored in any mix of KV formats (kv_format.h),
// read in place: no pass dequantizes a whole span into a buffer. Pure function of its arguments
// (per-thread scratch only): any thread.
#include <cstddef>
#include <cstdint>
#include <span>

#include "keel/kv/kv_format.h"
#include "keel/ops/attention_params.h"

namespace keel::kv {

// `count` consecutive rows of one (layer, kv head): row i's key at k + i*stride, value at
// v + i*stride, both encoded in `format` (rotated: encoded with rotate = true).
struct KvSpan {
  KvFormat format;
  bool rotated;
  const uint8_t* k;
  const uint8_t* v;
  int64_t count;
  size_t stride;
};

// Attention of one query over the rows of all spans, in order, with one online softmax. The rows
// are positions [first_pos, first_pos + rows) of one sequence and the query sits at the last one:
//   score_j = scale * q.k_j, then softcap * tanh(score_j / softcap) when softcap > 0
//   out[dim] = sum_j exp(score_j) v_j / (sum_j exp(score_j) + (has_sink ? exp(sink) : 0))
// over positions j >= ops::first_attended_position(last, window) only (earlier rows are skipped,
// so a caller may pass spans that start before the window). The sink is a logit with no value:
// it only takes weight away from the rows.
// q is not rotated; rotated spans see the rotated q, and their V sum is un-rotated once at the end.
// Keys in int8/int4/int2 are dotted with q rounded per group of 32 to int16 (to 1/65534 of the
// group's largest |q|; exact integer products, then one scale per group); bf16 keys see q as is.
// Scores move by ~1e-5 of their size, far below what quantizing the keys costs (1/254 for int8).
// No rows at all (or none in the window) gives zeros. Bad arguments (dim not valid for a span's
// format, negative count or first_pos) throw keel::Error.
//
// Deterministic and split-invariant: the result depends only on q, params and the rows read (their
// positions, bytes, format and rotation), never on threads, on how the rows are cut into spans or
// on how many rows before the window are passed. Rows are processed in fixed tiles of global
// position (positions [16t, 16t + 16) of the sequence, the window's start a global position too),
// so the same rows in different spans give bit-identical output; the prefix cache, chunked prefill
// and sliding-window layers that keep only their window rely on this. (Bits may differ between
// CPUs with different SIMD widths.)
void attend_spans(const float* q, int64_t dim, const ops::AttentionParams& params, std::span<const KvSpan> spans,
                  int64_t first_pos, float* out);

}  // namespace keel::kv
