#include "keel/plan/scratch_estimate.h"

#include <algorithm>

namespace keel::plan {
namespace {

constexpr std::string_view kWhy = "needed for the activation estimate";
constexpr uint64_t kF32 = 4;

std::optional<int64_t> first_int(const ConfigView& c, std::initializer_list<std::string_view> keys) {
  for (auto k : keys) {
    if (auto v = c.optional_int(k)) return v;
  }
  return std::nullopt;
}

// Width of the feed-forward activations per token: the dense MLP, or the experts a token is routed
// to plus any shared expert.
int64_t active_ffn_width(const ConfigView& c) {
  const int64_t dense = c.require_int("intermediate_size", kWhy);
  auto top_k = first_int(c, {"num_experts_per_tok", "experts_per_token", "top_k_experts"});
  if (!top_k) return dense;
  const int64_t expert = first_int(c, {"moe_intermediate_size"}).value_or(dense);
  int64_t shared = first_int(c, {"shared_expert_intermediate_size"}).value_or(0);
  if (auto n_shared = c.optional_int("n_shared_experts")) shared = *n_shared * expert;
  return std::max(dense, *top_k * expert) + shared;
}

}  // namespace

ScratchEstimate estimate_scratch(const ConfigView& c, const AttentionLayout& layout) {
  const int64_t hidden = c.require_int("hidden_size", kWhy);
  const int64_t heads = c.require_int("num_attention_heads", kWhy);
  const int64_t vocab = c.require_int("vocab_size", kWhy);

  int64_t q_head_dim = c.optional_int("head_dim").value_or(hidden / heads);
  if (auto g = c.optional_int("global_head_dim")) q_head_dim = std::max(q_head_dim, *g);
  if (c.has("kv_lora_rank")) {
    q_head_dim = c.optional_int("qk_nope_head_dim").value_or(0) + c.optional_int("qk_rope_head_dim").value_or(0);
  }
  int64_t kv_elements = 0;
  for (const LayerGroup& g : layout.groups) {
    int64_t e = 0;
    for (const KvVectors& v : g.shape.per_token) e += v.count * v.dim;
    kv_elements = std::max(kv_elements, e);
  }
  const int64_t experts = first_int(c, {"num_experts", "n_routed_experts", "num_local_experts"}).value_or(0);
  const int64_t per_token = 3 * hidden + 2 * heads * q_head_dim + kv_elements + 3 * active_ffn_width(c) + experts;

  ScratchEstimate s;
  s.activations = static_cast<uint64_t>(kPrefillChunkTokens * per_token) * kF32;
  s.attention_tiles = static_cast<uint64_t>(heads * kPrefillChunkTokens * kAttentionKeyTile) * kF32;
  s.logits = static_cast<uint64_t>(vocab) * kF32 * 2;
  return s;
}

}  // namespace keel::plan
