#pragma once
// Where a sequence's keys and values live between forward passes. The transformer only stores
// rows and asks for attention; how rows are laid out or compressed is the cache's business, so
// the quantized paged cache can replace the plain one without touching the forward pass. The
// attention math (scale, window, soft-cap, sink) and the query-to-KV-head mapping are the caller's
// (keel/ops/attention_params.h): the cache executes them over its rows.
//
// Threads: store() and set_size() from the thread running the forward pass; attend() concurrently
// from its workers, between the stores of a layer and the next pass.
#include <cstdint>

#include "keel/ops/attention_params.h"

namespace keel {

class KvCache {
 public:
  virtual ~KvCache() = default;

  virtual int64_t capacity() const = 0;  // most tokens it can hold
  virtual int64_t size() const = 0;      // tokens whose K/V are complete

  // Stores K and V ([num_kv_heads * head_dim] each) of one token at `pos` for one layer.
  virtual void store(int64_t layer, int64_t pos, const float* k, const float* v) = 0;

  // out[head_dim] = attention of one query (q[head_dim]) over KV head `kv_head` of `layer`, at
  // positions [ops::first_attended_position(n_pos - 1, params.window), n_pos). `scratch` holds at
  // least n_pos floats. Safe to call concurrently for different heads/tokens.
  virtual void attend(int64_t layer, int64_t kv_head, const float* q, int64_t n_pos, const ops::AttentionParams& params,
                      float* scratch, float* out) const = 0;

  // Marks positions [0, n) as complete (after a forward pass) or drops everything from n on.
  virtual void set_size(int64_t n) = 0;
};

}  // namespace keel
