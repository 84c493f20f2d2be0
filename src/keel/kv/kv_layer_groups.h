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
#include "keel/ops/gated_delta_rule.h"

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
// their own. Linear-attention layers store no rows and belong to no group (KvLinearLayers holds
// their state). Throws keel::Error, naming the layers, for what the pool cannot store yet:
// multi-head latent and shared-KV layers.
// split_at > 0 (a layer-aware KV policy's layer term, kv_policy.h) also keeps the layers below
// split_at apart from the others, so every group's layers store their rows alike.
std::vector<KvLayerGroup> kv_layer_groups(const ModelSpec& spec, int64_t split_at = 0);

// The linear-attention (recurrent) layers of a hybrid model (Qwen3-Next): a fixed-size state per
// sequence instead of rows. A snapshot (the state of a sequence after some block's last token, so
// that a reused prefix resumes exactly there) holds every linear layer's saved state
// (ops::LinearLayerState::save()) in layer order, as f32.
struct KvLinearLayers {
  std::vector<int64_t> layers;                    // model layer indices, ascending
  std::vector<ops::LinearAttentionShape> shapes;  // (layers)
  std::vector<int64_t> offsets;                   // (layers) each one's first float in a snapshot
  int64_t snapshot_floats = 0;
  int64_t live_floats = 0;  // one sequence's live state (ops::LinearLayerState of every layer)

  bool empty() const { return layers.empty(); }
  int64_t snapshot_bytes() const { return snapshot_floats * static_cast<int64_t>(sizeof(float)); }
  int64_t live_bytes() const { return live_floats * static_cast<int64_t>(sizeof(float)); }
  // Index into `layers` of model layer `layer`, or -1.
  int64_t index_of(int64_t layer) const;
};
KvLinearLayers kv_linear_layers(const ModelSpec& spec);

// One linear-attention layer's bytes: its live state per sequence, and its part of a snapshot.
struct KvLinearStateBytes {
  int64_t live = 0, snapshot = 0;
};
KvLinearStateBytes kv_linear_state_bytes(const LinearAttentionDims& dims);

// Blocks between two interval snapshots of the recurrent state (2048 tokens; --kv-state-interval).
inline constexpr int64_t kDefaultStateInterval = 128;
// Snapshots one sequence of `tokens` tokens holds at most: one per interval, its preamble's end,
// its latest and its branch point (KvPool, "Recurrent state").
int64_t kv_state_snapshots(int64_t tokens, int64_t interval = kDefaultStateInterval);

}  // namespace keel::kv
