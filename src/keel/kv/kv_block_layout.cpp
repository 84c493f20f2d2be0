#include "keel/kv/kv_block_layout.h"

#include "keel/kv/kv_window.h"

namespace keel::kv {

KvBlockLayout::KvBlockLayout(const ModelSpec& spec)
    : layers_(spec.num_layers), kv_heads_(spec.num_kv_heads), head_dim_(spec.head_dim) {}

size_t KvBlockLayout::row_bytes(KvFormat format) const {
  return static_cast<size_t>(kv_vector_bytes(format, head_dim_));
}

size_t KvBlockLayout::block_bytes(KvFormat format) const {
  return static_cast<size_t>(layers_ * kv_heads_ * 2 * kKvBlockTokens) * row_bytes(format);
}

size_t KvBlockLayout::token_bytes(KvFormat format) const {
  return static_cast<size_t>(layers_ * kv_heads_ * 2) * row_bytes(format);
}

size_t KvBlockLayout::keys_offset(KvFormat format, int64_t layer, int64_t kv_head) const {
  return static_cast<size_t>((layer * kv_heads_ + kv_head) * 2 * kKvBlockTokens) * row_bytes(format);
}

size_t KvBlockLayout::values_offset(KvFormat format, int64_t layer, int64_t kv_head) const {
  return keys_offset(format, layer, kv_head) + static_cast<size_t>(kKvBlockTokens) * row_bytes(format);
}

}  // namespace keel::kv
