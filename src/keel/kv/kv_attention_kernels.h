#pragma once
// The inner loop of attend_spans (kv_attention.cpp): one tile of kTile key positions, already
// widened to f32, against the queries that read it: their scores, their online-softmax step and
// their weighted sums of the values. Internal to keel::kv; pure function of its arguments (any
// thread).
//
// Every output element is computed by one fixed sequence of operations that does not depend on how
// many queries share the call or which other lanes of the tile are valid, so a query gives the same
// bits alone or in any block of queries (batch and chunking invariance rest on this).
#include <cstddef>
#include <cstdint>

#include "keel/kv/kv_format_cost.h"

namespace keel::kv::kernels {

// Positions per tile: tiles cover positions [64t, 64t + 64) of a sequence, whatever spans hold them.
// Wide enough that the per-tile softmax bookkeeping (a max, a sum, one exp) is shared by 64 keys.
inline constexpr int64_t kTile = 64;

// Queries whose scores one call of attend_tile holds at once.
inline constexpr int64_t kScoreRows = 6;

// A run of a tile's lanes whose values are stored in the rotated basis (int4/int2 rows encoded with
// the Walsh-Hadamard rotation) or not. A tile's runs are in lane order and cover its rows.
struct LaneRun {
  int64_t lo, hi;
  bool rotated;
};

// One query's view of a tile and its running softmax state.
struct TileQuery {
  const float* q;      // [dim]
  int64_t lo, hi;      // the lanes it reads: 0 <= lo < hi <= kTile
  float* running_max;  // largest score so far (or its sink)
  float* running_sum;  // sum of exp(score - running_max) so far
  float* acc;          // [dim] sum of exp(score - running_max) * value so far, over plain rows
  float* acc_rot;      // [dim] the same over rotated rows, still rotated (null: the call has none)
};

// For each query: score_j = scale * dot(q, key j) (then softcap * tanh(score_j / softcap) when
// softcap > 0) on lanes [lo, hi); raises the running max to the tile's largest, rescales the running
// sum and both accumulators by exp(old max - new max), and adds exp(score_j - max) and that times
// value j (into acc or acc_rot, by its run), j in order. kt holds the keys transposed (kt[d * kTile
// + j] = element d of key j, all in the model's basis), vt the values as kTile rows of dim floats;
// `scores` is scratch for kScoreRows * kTile floats.
void attend_tile(const float* kt, const float* vt, int64_t dim, const LaneRun* runs, int64_t n_runs,
                 const TileQuery* queries, int64_t n_queries, float scale, float softcap, float* scores);

// Undoes the rotation (kv::rotate_row, its own inverse) of every key of a transposed tile: the same
// butterflies on whole rows of kt, so each lane gets rotate_row of its key, bit for bit.
void unrotate_keys(float* kt, int64_t dim);

// Widens n bf16 rows (row r at rows + r * stride, dim values) into the tile: keys transposed,
// kt[d * kTile + r] (kt pointing at the first lane), values as rows, vt[r * dim + d]. Exact.
void widen_bf16_keys(const uint8_t* rows, size_t stride, int64_t n, int64_t dim, float* kt);
void widen_bf16_values(const uint8_t* rows, size_t stride, int64_t n, int64_t dim, float* vt);

// Decodes one quantized row (int8, int4 or int2, layouts in kv_format.h) of dim values, without
// un-rotating it: what kv::decode_kv_row gives with rotate = false, up to float rounding (the affine
// formats take one fused multiply-add).
void widen_quantized_row(KvFormat format, const uint8_t* row, int64_t dim, float* out);

}  // namespace keel::kv::kernels
