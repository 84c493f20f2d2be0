#include "keel/kv/kv_block_layout.h"

#include "keel/kv/kv_window.h"

namespace keel::kv {

KvBlockLayout::KvBlockLayout(const ModelSpec& spec, const KvPolicy& policy)
    : policy_(policy),
      groups_(kv_layer_groups(spec, policy.layer_split())),
      linear_(kv_linear_layers(spec)),
      group_of_(static_cast<size_t>(spec.num_layers), -1),
      index_in_group_(static_cast<size_t>(spec.num_layers), -1) {
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t i = 0; i < groups_[g].layers.size(); ++i) {
      const auto layer = static_cast<size_t>(groups_[g].layers[i]);
      group_of_[layer] = static_cast<int64_t>(g);
      index_in_group_[layer] = static_cast<int64_t>(i);
    }
}

KvRowForms KvBlockLayout::forms(int64_t group, KvFormat format) const {
  // Every layer of a group is on the same side of the layer term's split (kv_layer_groups).
  return policy_.row_forms(groups_[static_cast<size_t>(group)].layers.front(), format);
}

size_t KvBlockLayout::row_bytes(int64_t group, KvFormat format) const {
  return static_cast<size_t>(kv_vector_bytes(format, groups_[static_cast<size_t>(group)].head_dim));
}

size_t KvBlockLayout::key_row_bytes(int64_t group, KvFormat format) const { return row_bytes(group, forms(group, format).k); }

size_t KvBlockLayout::value_row_bytes(int64_t group, KvFormat format) const {
  return row_bytes(group, forms(group, format).v);
}

size_t KvBlockLayout::group_key_bytes(int64_t group, KvFormat format) const {
  const KvLayerGroup& g = groups_[static_cast<size_t>(group)];
  return static_cast<size_t>(static_cast<int64_t>(g.layers.size()) * g.kv_heads * kKvBlockTokens) *
         key_row_bytes(group, format);
}

size_t KvBlockLayout::group_bytes(int64_t group, KvFormat format) const {
  const KvLayerGroup& g = groups_[static_cast<size_t>(group)];
  return static_cast<size_t>(static_cast<int64_t>(g.layers.size()) * g.kv_heads * kKvBlockTokens) *
         (key_row_bytes(group, format) + value_row_bytes(group, format));
}

size_t KvBlockLayout::block_bytes(KvFormat format) const {
  size_t bytes = 0;
  for (int64_t g = 0; g < group_count(); ++g) bytes += group_bytes(g, format);
  return bytes;
}

size_t KvBlockLayout::token_bytes(KvFormat format) const { return block_bytes(format) / kKvBlockTokens; }

size_t KvBlockLayout::keys_offset(KvFormat format, int64_t layer, int64_t kv_head) const {
  const int64_t g = group_of(layer);
  return static_cast<size_t>((index_in_group(layer) * group(g).kv_heads + kv_head) * kKvBlockTokens) *
         (key_row_bytes(g, format) + value_row_bytes(g, format));
}

size_t KvBlockLayout::values_offset(KvFormat format, int64_t layer, int64_t kv_head) const {
  return keys_offset(format, layer, kv_head) + static_cast<size_t>(kKvBlockTokens) * key_row_bytes(group_of(layer), format);
}

}  // namespace keel::kv
