#pragma once
// Where a sequence's keys and values live between forward passes. The transformer only stores
// rows and asks for attention; how rows are laid out or compressed is the cache's business, so
// the quantized paged cache can replace the plain one without touching the forward pass.
#include <cstdint>

namespace keel {

class KvCache {
 public:
  virtual ~KvCache() = default;

  virtual int64_t capacity() const = 0;  // most tokens it can hold
  virtual int64_t size() const = 0;      // tokens whose K/V are complete

  // Stores K and V ([num_kv_heads * head_dim] each) of one token at `pos` for one layer.
  virtual void store(int64_t layer, int64_t pos, const float* k, const float* v) = 0;

  // out[head_dim] = attention of query head `head` (q[head_dim]) over positions [0, n_pos).
  // `scratch` holds at least n_pos floats. Safe to call concurrently for different heads/tokens.
  virtual void attend(int64_t layer, int64_t head, const float* q, int64_t n_pos, float* scratch,
                      float* out) const = 0;

  // Marks positions [0, n) as complete (after a forward pass) or drops everything from n on.
  virtual void set_size(int64_t n) = 0;
};

}  // namespace keel
