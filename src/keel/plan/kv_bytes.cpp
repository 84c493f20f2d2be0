#include "keel/plan/kv_bytes.h"

#include <vector>

#include "keel/kv/kv_layer_groups.h"
#include "keel/kv/kv_policy.h"

namespace keel::plan {

kv::KvGroupShape kv_group_shape(const LayerShape& shape, int64_t layers, std::vector<int64_t> layer_ids) {
  kv::KvGroupShape g;
  g.layers = layers;
  g.layer_ids = std::move(layer_ids);
  // Full and sliding layers keep K and V heads, half each; an MLA latent and its rope key count as keys.
  const bool key_value = shape.kind == AttentionKind::Full || shape.kind == AttentionKind::Sliding;
  for (const KvVectors& v : shape.per_token) g.per_token.push_back({v.count, v.dim, key_value});
  g.window = shape.kind == AttentionKind::Sliding ? shape.window : 0;
  return g;
}

int64_t layer_bytes_per_token(const LayerShape& shape, KvFormat format) {
  return kv_group_shape(shape, 1).token_bytes(format);
}

int64_t growing_bytes_per_token(const AttentionLayout& layout, KvFormat format) {
  int64_t bytes = 0;
  for (const LayerGroup& g : layout.groups) {
    if (g.shape.kind == AttentionKind::Full || g.shape.kind == AttentionKind::Mla) {
      bytes += group_bytes_per_token(g, format);
    }
  }
  return bytes;
}

uint64_t fixed_state_bytes(const AttentionLayout& layout) {
  uint64_t bytes = 0;
  for (const LayerGroup& g : layout.groups) bytes += static_cast<uint64_t>(g.layers * g.shape.fixed_state_bytes);
  return bytes;
}

uint64_t kv_bytes_for_context(const AttentionLayout& layout, KvPreset policy, int64_t context) {
  const kv::KvPolicy runtime = kv::KvPolicy::preset(policy);
  std::vector<kv::KvGroupShape> stored;
  for (const LayerGroup& g : layout.groups)
    if (!g.shape.per_token.empty()) stored.push_back(kv_group_shape(g.shape, g.layers, g.layer_ids));
  uint64_t snapshot = 0;
  for (const LayerGroup& g : layout.groups) snapshot += static_cast<uint64_t>(g.layers * g.shape.snapshot_bytes);
  return fixed_state_bytes(layout) + static_cast<uint64_t>(kv::kv_state_snapshots(context)) * snapshot +
         static_cast<uint64_t>(kv::kv_context_bytes(stored, runtime, context));
}

}  // namespace keel::plan
