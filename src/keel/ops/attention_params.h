#pragma once
// How one query head attends: the numbers an architecture decides (softmax scale, sliding window,
// logit soft-capping, a learned sink logit) and the head mapping of grouped-query attention. The
// arch/ blocks fill these from the layer's LayerSpec; the KV cache only executes them over its rows.
// Plain values and pure inline functions: any thread. An AttentionQuery only borrows q and out; the
// caller keeps them alive for the call.
#include <cstdint>

namespace keel::ops {

struct AttentionParams {
  float scale = 1.0f;     // multiplies q.k before the softmax (usually 1/sqrt(head_dim))
  int64_t window = 0;     // > 0: only the last `window` positions (the query's own included)
  float softcap = 0.0f;   // > 0: score = softcap * tanh(score / softcap) (Gemma 2)
  bool has_sink = false;  // gpt-oss: one more logit, `sink`, in the softmax's denominator only
  float sink = 0.0f;      // the sink of a single-query call; a multi-query call takes each query's own
};

// One query of a multi-query attention call (KvCache::attend): the query heads of one KV head, for
// one or more rows of one sequence, read each K/V tile once. Each query reads the positions
// [first_attended_position(pos, window), pos] and writes head_dim floats to out.
struct AttentionQuery {
  const float* q;    // [head_dim], in the model's basis (not rotated)
  int64_t pos;       // the position the query sits at
  float sink = 0;    // its head's sink logit, when AttentionParams::has_sink
  float* out;        // [head_dim]
};

// Grouped-query attention: query head h reads KV head h / (num_heads / num_kv_heads).
inline int64_t kv_head_of(int64_t q_head, int64_t num_heads, int64_t num_kv_heads) {
  return q_head / (num_heads / num_kv_heads);
}

// First position a query at `pos` reads under `window` (0: from the start).
inline int64_t first_attended_position(int64_t pos, int64_t window) {
  return window > 0 && pos + 1 > window ? pos + 1 - window : 0;
}

}  // namespace keel::ops
