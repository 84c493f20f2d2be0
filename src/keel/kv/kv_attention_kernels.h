#pragma once
// The per-row loops of attend_spans (kv_attention.cpp): scores of a run of keys and the weighted
// sum of a run of values, each reading one format in place. Internal to keel::kv.
#include <cstddef>
#include <cstdint>

#include "keel/kv/kv_format_cost.h"

namespace keel::kv::kernels {

// The query in the forms the key formats need, prepared once per call (and once more, rotated,
// when rotated rows are present). q16 is q quantized per group of 32 to int16: q ~ q_scale[g] * q16,
// precise to 1/65534 of the group's largest |q|, so integer dot products lose almost nothing.
struct PreparedQuery {
  const float* q;        // [dim]
  const int16_t* q16;    // [dim]
  const float* q_scale;  // [dim / 32]
  const float* q_sum;    // [dim / 32]: q_scale * sum of q16 over the group (for affine zero points)
};

// Fills the q16 / q_scale / q_sum arrays of a query (dim a multiple of 32).
void prepare_query(const float* q, int64_t dim, int16_t* q16, float* q_scale, float* q_sum);

// scores[i] = q . key_i (unscaled) for the n rows at k, k + stride, ...
void score_rows(KvFormat f, const PreparedQuery& q, int64_t dim, const uint8_t* k, size_t stride, int64_t n,
                float* scores);

// acc[dim] += p[i] * value_i for i = 0 .. n-1, in that order.
void accumulate_rows(KvFormat f, const float* p, int64_t dim, const uint8_t* v, size_t stride, int64_t n, float* acc);

// The softmax numerators of one tile: s[i] = exp(s[i] - max) for i < n (n <= kExpTile). Each
// element is computed alone, so a short tile gives the same values as a full one.
inline constexpr int64_t kExpTile = 16;
void exp_shifted(float* s, int64_t n, float max);

}  // namespace keel::kv::kernels
