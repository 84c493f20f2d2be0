#pragma once
// The layers of a model as the KV pool stores them: groups of layers with the same attention kind,
// window and row shape (vLLM calls them KV cache groups). Full-attention layers keep every
// position; sliding-window layers keep only the blocks their window still reaches, so each group
// has its own rows in a block and the pool can free a sliding group's rows alone.
//
// Built once from the ModelSpec; plain data, read-only afterwards, any thread.
#include <cstdint>
#include <vector>

#include "keel/model/model_spec.h"

namespace keel::kv {

struct KvLayerGroup {
  AttentionKind attention = AttentionKind::Full;  // Full or Sliding
  int64_t window = 0;                             // Sliding: positions a query reads, its own included
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  std::vector<int64_t> layers;  // model layer indices, ascending
};

// One group per distinct (attention kind, window, kv_heads, head_dim) among spec.layers, in order
// of first appearance: Gemma 4's global layers (other head size and KV-head count) get a group of
// their own. Throws keel::Error, naming the layers, for what the pool cannot store yet: multi-head
// latent, linear (recurrent) and shared-KV layers.
// split_at > 0 (a layer-aware KV policy's layer term, kv_policy.h) also keeps the layers below
// split_at apart from the others, so every group's layers store their rows alike.
std::vector<KvLayerGroup> kv_layer_groups(const ModelSpec& spec, int64_t split_at = 0);

}  // namespace keel::kv
