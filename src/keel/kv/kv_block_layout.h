#pragma once
// Where rows sit inside one pool block. A block holds K and V of kKvBlockTokens consecutive tokens
// for every layer, one buffer per layer group (kv_layer_groups.h) so that a sliding group's rows can
// be freed alone. A group's buffer is laid out [layer of the group][kv_head][K rows | V rows][token],
// so the rows of one (layer, kv head) are a KvSpan: K at keys_offset, V at values_offset, strides =
// their row bytes.
//
// A block's quantized rows are in the forms the policy gives its format in each group
// (KvPolicy::row_forms): a layer-aware policy keeps some layers' keys or values more precise, so
// the layout is built with the policy, whose layer term also splits the layer groups (every layer
// of a group stores its rows alike). Every `format` argument below is a block's format; bf16 is
// also the full-precision form, which every layer stores as bf16.
//
// Built once per pool; read-only afterwards, any thread.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "keel/kv/kv_format_cost.h"
#include "keel/kv/kv_layer_groups.h"
#include "keel/kv/kv_policy.h"
#include "keel/model/model_spec.h"

namespace keel::kv {

class KvBlockLayout {
 public:
  // Throws keel::Error for models the pool cannot store (see kv_layer_groups()).
  explicit KvBlockLayout(const ModelSpec& spec, const KvPolicy& policy = KvPolicy());

  int64_t layers() const { return static_cast<int64_t>(group_of_.size()); }

  const std::vector<KvLayerGroup>& groups() const { return groups_; }
  // Linear-attention layers (no rows; a block may carry a snapshot of their state).
  const KvLinearLayers& linear() const { return linear_; }
  int64_t group_count() const { return static_cast<int64_t>(groups_.size()); }
  const KvLayerGroup& group(int64_t g) const { return groups_[static_cast<size_t>(g)]; }
  int64_t group_of(int64_t layer) const { return group_of_[static_cast<size_t>(layer)]; }
  int64_t index_in_group(int64_t layer) const { return index_in_group_[static_cast<size_t>(layer)]; }

  // The forms a block of `format` stores the group's rows in (bf16: {bf16, bf16}); quantizes():
  // whether the group's rows of such a block are quantized at all.
  KvRowForms forms(int64_t group, KvFormat format) const;
  bool quantizes(int64_t group, KvFormat format) const { return forms(group, format).quantized(); }
  // One encoded row of the group (one token, one kv head, K or V) == kv_vector_bytes(format, head_dim).
  size_t row_bytes(int64_t group, KvFormat format) const;
  // One K (V) row of the group in a block of `format`: row_bytes of forms(group, format).k (.v).
  size_t key_row_bytes(int64_t group, KvFormat format) const;
  size_t value_row_bytes(int64_t group, KvFormat format) const;
  // Of group_bytes(group, format), the bytes of K rows and of V rows.
  size_t group_key_bytes(int64_t group, KvFormat format) const;
  // One group's buffer in one block: every layer of the group, kv head, K and V row of its tokens.
  size_t group_bytes(int64_t group, KvFormat format) const;
  // The whole block in one format: every group.
  size_t block_bytes(KvFormat format) const;
  // One token's K and V over all layers.
  size_t token_bytes(KvFormat format) const;
  // Offsets inside the buffer of the layer's group (row_bytes(group_of(layer), format) apart).
  size_t keys_offset(KvFormat format, int64_t layer, int64_t kv_head) const;
  size_t values_offset(KvFormat format, int64_t layer, int64_t kv_head) const;

 private:
  KvPolicy policy_;
  std::vector<KvLayerGroup> groups_;
  KvLinearLayers linear_;
  std::vector<int64_t> group_of_, index_in_group_;  // (layers); -1 for linear-attention layers
};

}  // namespace keel::kv
