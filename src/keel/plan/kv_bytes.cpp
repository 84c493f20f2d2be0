#include "keel/plan/kv_bytes.h"

#include <algorithm>

namespace keel::plan {

int64_t layer_bytes_per_token(const LayerShape& shape, KvFormat format) {
  int64_t bytes = 0;
  for (const KvVectors& v : shape.per_token) bytes += v.count * kv_vector_bytes(format, v.dim);
  return bytes;
}

int64_t growing_bytes_per_token(const AttentionLayout& layout, KvFormat format) {
  int64_t bytes = 0;
  for (const LayerGroup& g : layout.groups) {
    if (g.shape.kind == LayerKind::FullAttention || g.shape.kind == LayerKind::Mla) {
      bytes += group_bytes_per_token(g, format);
    }
  }
  return bytes;
}

uint64_t fixed_state_bytes(const AttentionLayout& layout) {
  uint64_t bytes = 0;
  for (const LayerGroup& g : layout.groups) bytes += static_cast<uint64_t>(g.layers * g.shape.fixed_state_bytes);
  return bytes;
}

uint64_t kv_bytes_for_context(const AttentionLayout& layout, KvPolicy policy, int64_t context) {
  uint64_t total = 0;
  for (const LayerGroup& g : layout.groups) {
    total += static_cast<uint64_t>(g.layers * g.shape.fixed_state_bytes);
    if (g.shape.per_token.empty()) continue;
    const bool windowed = g.shape.kind == LayerKind::SlidingAttention;
    const int64_t stored = windowed ? std::min(context, g.shape.window) : context;
    const TokenFormatSplit split = split_tokens(policy, stored, windowed);
    const auto per_token = [&](KvFormat f) { return static_cast<uint64_t>(group_bytes_per_token(g, f)); };
    total += static_cast<uint64_t>(split.bf16) * per_token(KvFormat::BF16) +
             static_cast<uint64_t>(split.int8) * per_token(KvFormat::Int8) +
             static_cast<uint64_t>(split.int4) * per_token(KvFormat::Int4);
  }
  return total;
}

}  // namespace keel::plan
