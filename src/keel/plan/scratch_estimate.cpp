#include "keel/plan/scratch_estimate.h"

#include <algorithm>

namespace keel::plan {
namespace {

constexpr uint64_t kF32 = 4;

// Width of the feed-forward activations per token: the dense MLP or the experts a token is routed
// to, whichever is wider, plus any shared expert.
int64_t active_ffn_width(const ModelSpec& spec) {
  int64_t width = spec.intermediate_size, shared = 0;
  for (const LayerSpec& l : spec.layers) {
    width = std::max(width, l.moe ? l.moe->experts_per_token * l.moe->expert_ffn_dim : l.ffn_dim);
    if (l.moe) shared = std::max(shared, l.moe->shared_expert_ffn_dim);
  }
  return width + shared;
}

// Per token, the inputs (then outputs) of its routed slots, all of a layer's experts running
// together (arch/blocks.cpp): experts_per_token rows of the model's width.
int64_t routed_slot_width(const ModelSpec& spec) {
  int64_t width = 0;
  for (const LayerSpec& l : spec.layers)
    if (l.moe) width = std::max(width, l.moe->experts_per_token * spec.hidden_size);
  return width;
}

}  // namespace

ScratchEstimate estimate_scratch(const ModelSpec& spec, const AttentionLayout& layout) {
  int64_t q_head_dim = 0, experts = 0;
  for (const LayerSpec& l : spec.layers) {
    q_head_dim = std::max(q_head_dim, l.mla ? l.mla->qk_nope_head_dim + l.mla->qk_rope_head_dim : l.head_dim);
    if (l.moe) experts = std::max(experts, l.moe->experts);
  }
  int64_t kv_elements = 0;
  for (const LayerGroup& g : layout.groups) {
    int64_t e = 0;
    for (const KvVectors& v : g.shape.per_token) e += v.count * v.dim;
    kv_elements = std::max(kv_elements, e);
  }
  const int64_t heads = spec.num_heads;
  const int64_t per_token =
      3 * spec.hidden_size + 2 * heads * q_head_dim + kv_elements + 3 * active_ffn_width(spec) + experts +
      routed_slot_width(spec);

  ScratchEstimate s;
  s.activations = static_cast<uint64_t>(kPrefillChunkTokens * per_token) * kF32;
  s.attention_tiles = static_cast<uint64_t>(heads * kPrefillChunkTokens * kAttentionKeyTile) * kF32;
  s.logits = static_cast<uint64_t>(spec.vocab_size) * kF32 * 2;
  return s;
}

}  // namespace keel::plan
