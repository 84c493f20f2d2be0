#pragma once
// The inner loops of attend_spans (kv_attention.cpp) over one tile of kTile key positions, already
// widened to f32: the scores of several queries, one query's online-softmax step, and its weighted
// sum of the values. Internal to keel::kv; pure functions of their arguments (any thread).
//
// Every output element is computed by one fixed sequence of operations that does not depend on how
// many queries share the call or which other lanes of the tile are valid, so a query gives the same
// bits alone or in any block of queries (batch and chunking invariance rest on this).
#include <cstdint>

namespace keel::kv::kernels {

// Positions per tile: tiles cover positions [16t, 16t + 16) of a sequence, whatever spans hold them.
inline constexpr int64_t kTile = 16;

// scores[i * kTile + j] = dot(q[i], key j) for i < n_queries and every lane j, where kt is the
// tile's keys transposed: kt[d * kTile + j] = element d of key j (dim rows of kTile floats).
void score_tile(const float* kt, int64_t dim, const float* const* q, int64_t n_queries, float* scores);

// One query's online-softmax step over lanes [lo, hi) of a tile (0 <= lo < hi <= kTile): turns the
// raw dot products s into scale * s (soft-capped as softcap * tanh(. / softcap) when softcap > 0),
// raises *running_max to the tile's largest, returns the factor the sums so far must be multiplied
// by (exp(old max - new max), 1 when it did not grow), sets s[j] = exp(score_j - max) on the lanes
// (0 elsewhere), and adds their sum to *running_sum (after scaling it by the factor).
float softmax_tile(float* s, int64_t lo, int64_t hi, float scale, float softcap, float* running_max,
                   float* running_sum);

// acc[d] = acc[d] * factor + sum over j in [lo, hi) of p[j] * v[j * dim + d], j in order; v is the
// tile's values as kTile rows of dim floats.
void accumulate_tile(const float* v, int64_t dim, const float* p, int64_t lo, int64_t hi, float factor, float* acc);

}  // namespace keel::kv::kernels
