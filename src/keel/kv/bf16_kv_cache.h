#pragma once
// The plain cache: every K and V value rounded to bf16, one contiguous buffer per layer laid out
// [position][kv_head][head_dim], allocated for the full capacity up front.
#include <cstdint>
#include <vector>

#include "keel/kv/kv_cache.h"
#include "keel/model/model_spec.h"

namespace keel {

class Bf16KvCache final : public KvCache {
 public:
  Bf16KvCache(const ModelSpec& spec, int64_t capacity);

  int64_t capacity() const override { return capacity_; }
  int64_t size() const override { return size_; }
  void store(int64_t layer, int64_t pos, const float* k, const float* v) override;
  void attend(int64_t layer, int64_t head, const float* q, int64_t n_pos, float* scratch, float* out) const override;
  void set_size(int64_t n) override;

  size_t bytes() const { return (k_.size() + v_.size()) * sizeof(uint16_t); }

 private:
  int64_t num_heads_, num_kv_heads_, head_dim_, capacity_, size_ = 0;
  int64_t row_;  // num_kv_heads * head_dim
  float scale_;
  std::vector<uint16_t> k_, v_;  // [layer][pos][kv_head][head_dim]
};

}  // namespace keel
