#pragma once
// Where rows sit inside one pool block. A block holds all layers' K and V of kKvBlockTokens
// consecutive tokens in one format, laid out [layer][kv_head][K rows | V rows][token], so the rows
// of one (layer, kv head) are a KvSpan: K at keys_offset, V at values_offset, stride = row bytes.
#include <cstddef>
#include <cstdint>

#include "keel/kv/kv_format_cost.h"
#include "keel/model/model_spec.h"

namespace keel::kv {

class KvBlockLayout {
 public:
  explicit KvBlockLayout(const ModelSpec& spec);

  int64_t layers() const { return layers_; }
  int64_t kv_heads() const { return kv_heads_; }
  int64_t head_dim() const { return head_dim_; }

  // One encoded row (one token, one kv head, K or V) == kv_vector_bytes(format, head_dim).
  size_t row_bytes(KvFormat format) const;
  // The whole block in one format: every layer, kv head, K and V row of its tokens.
  size_t block_bytes(KvFormat format) const;
  // One token's K and V over all layers.
  size_t token_bytes(KvFormat format) const;
  size_t keys_offset(KvFormat format, int64_t layer, int64_t kv_head) const;
  size_t values_offset(KvFormat format, int64_t layer, int64_t kv_head) const;

 private:
  int64_t layers_, kv_heads_, head_dim_;
};

}  // namespace keel::kv
