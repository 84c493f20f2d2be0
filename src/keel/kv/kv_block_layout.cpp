#include "keel/kv/kv_block_layout.h"

#include "keel/kv/kv_window.h"

namespace keel::kv {

KvBlockLayout::KvBlockLayout(const ModelSpec& spec)
    : groups_(kv_layer_groups(spec)),
      group_of_(static_cast<size_t>(spec.num_layers), -1),
      index_in_group_(static_cast<size_t>(spec.num_layers), -1),
      kv_heads_(groups_.empty() ? 0 : groups_.front().kv_heads),
      head_dim_(groups_.empty() ? 0 : groups_.front().head_dim) {
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t i = 0; i < groups_[g].layers.size(); ++i) {
      const auto layer = static_cast<size_t>(groups_[g].layers[i]);
      group_of_[layer] = static_cast<int64_t>(g);
      index_in_group_[layer] = static_cast<int64_t>(i);
    }
}

size_t KvBlockLayout::row_bytes(KvFormat format) const {
  return static_cast<size_t>(kv_vector_bytes(format, head_dim_));
}

size_t KvBlockLayout::group_bytes(int64_t group, KvFormat format) const {
  const auto layers = static_cast<int64_t>(groups_[static_cast<size_t>(group)].layers.size());
  return static_cast<size_t>(layers * kv_heads_ * 2 * kKvBlockTokens) * row_bytes(format);
}

size_t KvBlockLayout::block_bytes(KvFormat format) const {
  return static_cast<size_t>(kKvBlockTokens) * token_bytes(format);
}

size_t KvBlockLayout::token_bytes(KvFormat format) const {
  return static_cast<size_t>(layers() * kv_heads_ * 2) * row_bytes(format);
}

size_t KvBlockLayout::keys_offset(KvFormat format, int64_t layer, int64_t kv_head) const {
  return static_cast<size_t>((index_in_group(layer) * kv_heads_ + kv_head) * 2 * kKvBlockTokens) * row_bytes(format);
}

size_t KvBlockLayout::values_offset(KvFormat format, int64_t layer, int64_t kv_head) const {
  return keys_offset(format, layer, kv_head) + static_cast<size_t>(kKvBlockTokens) * row_bytes(format);
}

}  // namespace keel::kv
