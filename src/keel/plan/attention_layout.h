#pragma once
// What each layer of a model keeps per token of context, from its ModelSpec. This is where the
// usual hand estimates go wrong: only attention layers grow with the context, a sliding-window
// layer stops growing at its window, a linear-attention (recurrent) layer of a hybrid model holds
// a fixed state instead, and an MLA layer caches one compressed latent rather than K and V heads.
// Pure functions of the spec or config; the layout is a plain value the caller owns: any thread.
#include <cstdint>
#include <string>
#include <vector>

#include "keel/model/config_view.h"
#include "keel/model/model_spec.h"

namespace keel::plan {

// `count` vectors of `dim` elements, per token, in one layer (the quantization groups run along
// each vector, so K heads, V heads and MLA latents are kept apart).
struct KvVectors {
  int64_t count = 0;
  int64_t dim = 0;
  bool operator==(const KvVectors&) const = default;
};

struct LayerShape {
  AttentionKind kind = AttentionKind::Full;
  std::vector<KvVectors> per_token;  // empty for linear-attention and shared-KV layers
  int64_t window = 0;                // sliding layers only
  int64_t fixed_state_bytes = 0;     // linear-attention layers: a sequence's live recurrent and conv state
  int64_t snapshot_bytes = 0;        // ... and its part of one state snapshot (kv_layer_groups.h)
  std::string description;           // "8 KV heads x 128, K and V"
  bool operator==(const LayerShape& o) const {
    return kind == o.kind && per_token == o.per_token && window == o.window && fixed_state_bytes == o.fixed_state_bytes &&
           snapshot_bytes == o.snapshot_bytes;
  }
};

// Layers of the same shape, counted once, in first-appearance order.
struct LayerGroup {
  LayerShape shape;
  int64_t layers = 0;
  std::vector<int64_t> layer_ids = {};  // the model's indices of those layers (a KV layer term needs them)
};

struct AttentionLayout {
  int64_t num_layers = 0;
  std::vector<LayerGroup> groups;
  std::string layer_pattern_source;  // which config key decided the layer kinds
};

// Layers of `spec` grouped by shape.
AttentionLayout read_attention_layout(const ModelSpec& spec);
// The same for the model `config` describes (arch::describe_spec). Throws keel::Error naming the
// file and the missing or invalid key.
AttentionLayout read_attention_layout(const ConfigView& config);


}  // namespace keel::plan
