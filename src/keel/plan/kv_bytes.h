#pragma once
// KV bytes of one sequence as the planner reports them: per token per layer group, and in total for
// a context under a preset. The byte rules are the KV pool's own (keel/kv/kv_footprint.h: whole
// blocks, the recent window, sliding windows), so a plan never disagrees with what the pool stores;
// this file maps the planner's layer groups (read from config.json, including kinds keel cannot run
// yet) onto them and adds the fixed state of linear-attention layers. Pure functions: any thread.
#include <cstdint>
#include <vector>

#include "keel/kv/kv_footprint.h"
#include "keel/kv/kv_format_cost.h"
#include "keel/plan/attention_layout.h"
#include "keel/plan/kv_presets.h"

namespace keel::plan {

// The shape the KV byte arithmetic sees for `layers` layers of this shape.
// layer_ids: the model's indices of those layers (needed by a policy with a layer term).
kv::KvGroupShape kv_group_shape(const LayerShape& shape, int64_t layers, std::vector<int64_t> layer_ids = {});

// One token in one layer of this shape (0 for layers that keep nothing per token).
int64_t layer_bytes_per_token(const LayerShape& shape, KvFormat format);

// One token in all layers of the group.
inline int64_t group_bytes_per_token(const LayerGroup& g, KvFormat format) {
  return kv_group_shape(g.shape, g.layers).token_bytes(format);
}

// What each further token costs once every sliding window is full: full-attention and MLA layers.
int64_t growing_bytes_per_token(const AttentionLayout& layout, KvFormat format);

// One sequence's live recurrent state in the linear-attention layers, the same for any context and
// policy; kv_bytes_for_context() adds the state snapshots the sequence keeps on its way.
uint64_t fixed_state_bytes(const AttentionLayout& layout);

// The most the cache of one sequence holds on its way to `context` tokens under a concrete preset
// (not Auto: keel::Error), with the preset's roles unknown (every token at the default format):
// kv::kv_context_bytes() over the layers that store tokens, plus the fixed state.
uint64_t kv_bytes_for_context(const AttentionLayout& layout, KvPreset policy, int64_t context);

}  // namespace keel::plan
