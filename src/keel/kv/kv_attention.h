#pragma once
// Attention of one query head over cached rows stored in any mix of KV formats (kv_format.h),
// read in place: no pass dequantizes a whole span into a buffer.
#include <cstddef>
#include <cstdint>
#include <span>

#include "keel/kv/kv_format.h"

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

// out[dim] = softmax(scale * q.K) V over all rows of all spans, in order, with one online softmax.
// q is not rotated; rotated spans see the rotated q, and their V sum is un-rotated once at the end.
// Keys in int8/int4/int2 are dotted with q rounded per group of 32 to int16 (to 1/65534 of the
// group's largest |q|; exact integer products, then one scale per group); bf16 keys see q as is.
// Scores move by ~1e-5 of their size, far below what quantizing the keys costs (1/254 for int8).
// No rows at all gives zeros. Bad arguments (dim not valid for a span's format, negative count)
// throw keel::Error.
//
// Deterministic and split-invariant: the result depends only on q, scale and the sequence of rows
// (their bytes, format and rotation), never on threads or on how the rows are cut into spans.
// Rows are processed in fixed tiles of global row index (rows [16t, 16t + 16) of the whole
// sequence), so splitting the same rows into different spans gives bit-identical output; the
// prefix cache relies on this. (Bits may differ between CPUs with different SIMD widths.)
void attend_spans(const float* q, int64_t dim, float scale, std::span<const KvSpan> spans, float* out);

}  // namespace keel::kv
