#include "keel/kv/bf16_kv_cache.h"

#include <cmath>

#include "keel/ops/simd_kernels.h"
#include "keel/util/error.h"
#include "keel/util/half.h"

namespace keel {

Bf16KvCache::Bf16KvCache(const ModelSpec& spec, int64_t capacity)
    : num_heads_(spec.num_heads),
      num_kv_heads_(spec.num_kv_heads),
      head_dim_(spec.head_dim),
      capacity_(capacity),
      row_(spec.num_kv_heads * spec.head_dim),
      scale_(static_cast<float>(1.0 / std::sqrt(static_cast<double>(spec.head_dim)))) {
  if (capacity <= 0) throw Error("KV cache capacity must be positive");
  const size_t n = static_cast<size_t>(spec.num_layers * capacity * row_);
  k_.assign(n, 0);
  v_.assign(n, 0);
}

void Bf16KvCache::store(int64_t layer, int64_t pos, const float* k, const float* v) {
  if (pos < 0 || pos >= capacity_)
    throw Error("context full: position " + std::to_string(pos) + " exceeds the KV cache capacity of " +
                std::to_string(capacity_) + " tokens");
  const size_t base = static_cast<size_t>((layer * capacity_ + pos) * row_);
  for (int64_t i = 0; i < row_; ++i) {
    k_[base + static_cast<size_t>(i)] = float_to_bf16(k[i]);
    v_[base + static_cast<size_t>(i)] = float_to_bf16(v[i]);
  }
}

void Bf16KvCache::attend(int64_t layer, int64_t head, const float* q, int64_t n_pos, float* scratch,
                         float* out) const {
  const int64_t kv_head = head / (num_heads_ / num_kv_heads_);  // grouped-query attention
  const size_t base = static_cast<size_t>(layer * capacity_ * row_ + kv_head * head_dim_);
  ops::attend_bf16(q, k_.data() + base, v_.data() + base, row_, n_pos, head_dim_, scale_, scratch, out);
}

void Bf16KvCache::set_size(int64_t n) {
  if (n < 0 || n > capacity_) throw Error("KV cache size out of range");
  size_ = n;
}

}  // namespace keel
