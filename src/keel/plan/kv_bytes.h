#pragma once
// KV bytes of one sequence: per token per layer kind, and in total for a context under a policy.
#include <cstdint>

#include "keel/plan/attention_layout.h"
#include "keel/kv/kv_format_cost.h"
#include "keel/plan/kv_policy.h"

namespace keel::plan {

// One token in one layer of this shape (0 for layers that keep nothing per token).
int64_t layer_bytes_per_token(const LayerShape& shape, KvFormat format);

// One token in all layers of the group.
inline int64_t group_bytes_per_token(const LayerGroup& g, KvFormat format) {
  return g.layers * layer_bytes_per_token(g.shape, format);
}

// What each further token costs once every sliding window is full: full-attention and MLA layers.
int64_t growing_bytes_per_token(const AttentionLayout& layout, KvFormat format);

// Recurrent state of the linear-attention layers, the same for any context and policy.
uint64_t fixed_state_bytes(const AttentionLayout& layout);

// The cache of one sequence of `context` tokens under a concrete preset (not Auto).
uint64_t kv_bytes_for_context(const AttentionLayout& layout, KvPolicy policy, int64_t context);

}  // namespace keel::plan
