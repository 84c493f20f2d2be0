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
#include <span>

#include "keel/ops/attention_params.h"
#include "keel/ops/gated_delta_rule.h"
#include "keel/util/error.h"

namespace keel {

class KvCache {
 public:
  virtual ~KvCache() = default;

  virtual int64_t capacity() const = 0;  // most tokens it can hold
  virtual int64_t size() const = 0;      // tokens whose K/V are complete

  // Stores K and V ([num_kv_heads * head_dim] each) of one token at `pos` for one layer.
  virtual void store(int64_t layer, int64_t pos, const float* k, const float* v) = 0;

  // Attention of several queries over KV head `kv_head` of `layer` (ops::AttentionQuery: each reads
  // the positions [ops::first_attended_position(pos, params.window), pos] and writes head_dim
  // floats). A query's result does not depend on the other queries of the call. Safe to call
  // concurrently for different heads/tokens.
  virtual void attend(int64_t layer, int64_t kv_head, std::span<const ops::AttentionQuery> queries,
                      const ops::AttentionParams& params) const = 0;

  // One query at `pos`, with params.sink as its sink (tests and tools).
  void attend_one(int64_t layer, int64_t kv_head, const float* q, int64_t pos, const ops::AttentionParams& params,
                  float* out) const {
    const ops::AttentionQuery query{.q = q, .pos = pos, .sink = params.sink, .out = out};
    attend(layer, kv_head, std::span(&query, 1), params);
  }

  // Marks positions [0, n) as complete (after a forward pass) or drops everything from n on.
  virtual void set_size(int64_t n) = 0;

  // Linear-attention (recurrent) layers keep no rows: the sequence's state of such a layer, which
  // the forward pass advances in place (its position() runs ahead of size() during a pass).
  virtual ops::LinearLayerState& linear_state(int64_t layer) {
    throw InternalError("this KV cache keeps no linear-attention state (layer " + std::to_string(layer) + ")");
  }
  // Where the forward pass saves the state of `layer` when it reaches tile boundary `pos` (a
  // multiple of ops::kDeltaTile, LinearLayerState::save()), or nullptr when the cache keeps no
  // snapshot there. Asked on the forward pass's thread.
  virtual float* linear_snapshot(int64_t /*layer*/, int64_t /*pos*/) { return nullptr; }
};

}  // namespace keel
