#include "keel/kv/kv_footprint.h"

#include <algorithm>
#include <string>

#include "keel/kv/kv_layer_groups.h"
#include "keel/kv/kv_window.h"
#include "keel/util/error.h"

namespace keel::kv {
namespace {

// Where one group's blocks stand after a sequence of n tokens ran from an empty cache, by the rules
// of KvSequence::store() and set_size().
struct GroupState {
  int64_t kept_from;        // blocks before it hold nothing in this group (sliding windows)
  int64_t blocks;           // blocks_for_tokens(n)
  int64_t quantized_below;  // blocks out of the last token's recent window
  int64_t full_kept_from;   // out-of-window blocks from here on keep their bf16 rows too
  // A sliding layer quantizes a block only if a query still reads it once it has left the recent
  // window, which happens exactly when its window is wider than the recent window.
  bool quantizes;
  int64_t block_bf16, block_quantized;  // bytes of the group's rows in one block
};

// What a block of `format` stores the group's rows in (the layer term raises early layers').
KvRowForms forms_of(const KvGroupShape& g, const KvPolicy& policy, KvFormat format) {
  return g.under_layer_term ? policy.row_forms(0, format) : KvRowForms{format, format};
}

GroupState state_of(const KvGroupShape& g, const KvPolicy& policy, int64_t n, KvFormat format) {
  const KvRowForms forms = forms_of(g, policy, format);
  return {window_rows_kept_from(n, g.window),
          blocks_for_tokens(n),
          window_start_block(n - 1, policy.recent()),
          full_rows_kept_from(n, policy.recent()),
          forms.quantized() && (g.window == 0 || policy.recent() < g.window),
          g.token_bytes(KvFormat::BF16) * kKvBlockTokens,
          g.token_bytes(forms) * kKvBlockTokens};
}

// Blocks of `format` in [first, end) that are quantized, and how many of them keep bf16 rows too.
struct Quantized {
  int64_t count = 0, with_full = 0;
};
Quantized quantized_range(const GroupState& s, KvFormat format, int64_t first, int64_t end) {
  first = std::max(first, s.kept_from);
  end = std::min(end, s.quantized_below);
  if (!s.quantizes || format == KvFormat::BF16 || end <= first) return {};
  return {end - first, std::max<int64_t>(0, end - std::max(first, s.full_kept_from))};
}

// One group, every token of `role`: the first blocks_for_tokens(sink) blocks are bf16 (sinks), the
// rest take the role's format.
int64_t uniform_group_bytes(const KvGroupShape& g, const KvPolicy& policy, int64_t n, chat::Role role) {
  const KvFormat format = policy.role_format(role);
  const GroupState s = state_of(g, policy, n, format);
  const Quantized q = quantized_range(s, format, blocks_for_tokens(policy.sink()), s.blocks);
  const int64_t full = s.blocks - s.kept_from - q.count + q.with_full;
  return q.count * s.block_quantized + full * s.block_bf16;
}

}  // namespace

int64_t KvGroupShape::token_bytes(KvRowForms forms) const {
  int64_t bytes = 0;
  for (const KvVectorShape& v : per_token) {
    if (v.key_value)
      bytes += v.count / 2 * kv_vector_bytes(forms.k, v.dim) + (v.count - v.count / 2) * kv_vector_bytes(forms.v, v.dim);
    else
      bytes += v.count * kv_vector_bytes(forms.k, v.dim);
  }
  return layers * bytes;
}

std::vector<KvGroupShape> kv_group_shapes(const ModelSpec& spec) {
  std::vector<KvGroupShape> shapes;
  for (const KvLayerGroup& g : kv_layer_groups(spec))
    shapes.push_back({static_cast<int64_t>(g.layers.size()), {{2 * g.kv_heads, g.head_dim, true}}, g.window, g.layers});
  return shapes;
}

std::vector<KvGroupShape> kv_split_by_layer_term(std::span<const KvGroupShape> groups, const KvPolicy& policy) {
  const int64_t split = policy.layer_split();
  std::vector<KvGroupShape> out;
  for (const KvGroupShape& g : groups) {
    if (split == 0 || g.under_layer_term) {
      out.push_back(g);
      continue;
    }
    if (static_cast<int64_t>(g.layer_ids.size()) != g.layers)
      throw Error("KV policy '" + policy.describe() + "': its layer term needs the layer indices of every layer group");
    KvGroupShape early = g, late = g;
    early.layer_ids.clear();
    late.layer_ids.clear();
    for (int64_t id : g.layer_ids) (id < split ? early : late).layer_ids.push_back(id);
    early.layers = static_cast<int64_t>(early.layer_ids.size());
    late.layers = static_cast<int64_t>(late.layer_ids.size());
    early.under_layer_term = true;
    if (early.layers > 0) out.push_back(std::move(early));
    if (late.layers > 0) out.push_back(std::move(late));
  }
  return out;
}

int64_t kv_sequence_bytes(std::span<const KvGroupShape> unsplit, const KvPolicy& policy,
                          std::span<const chat::Role> roles) {
  const auto n = static_cast<int64_t>(roles.size());
  if (n == 0) return 0;
  const std::vector<KvGroupShape> groups = kv_split_by_layer_term(unsplit, policy);
  int64_t bytes = 0;
  for (int64_t b = 0; b < blocks_for_tokens(n); ++b) {
    const int64_t first = b * kKvBlockTokens;
    const auto count = static_cast<size_t>(std::min(kKvBlockTokens, n - first));
    const KvFormat format = policy.block_format(roles.subspan(static_cast<size_t>(first), count), first);
    for (const KvGroupShape& g : groups) {
      const GroupState s = state_of(g, policy, n, format);
      if (b < s.kept_from) continue;
      const Quantized q = quantized_range(s, format, b, b + 1);
      bytes += q.count * s.block_quantized + (1 - q.count + q.with_full) * s.block_bf16;
    }
  }
  return bytes;
}

int64_t kv_sequence_bytes(const ModelSpec& spec, const KvPolicy& policy, std::span<const chat::Role> roles) {
  return kv_sequence_bytes(kv_group_shapes(spec), policy, roles);
}

int64_t kv_context_bytes(std::span<const KvGroupShape> unsplit, const KvPolicy& policy, int64_t tokens,
                         chat::Role role) {
  if (tokens < 0) throw Error("KV bytes for a negative context of " + std::to_string(tokens) + " tokens");
  const std::vector<KvGroupShape> groups = kv_split_by_layer_term(unsplit, policy);
  const auto bytes_at = [&](int64_t n) {
    int64_t bytes = 0;
    for (const KvGroupShape& g : groups) bytes += uniform_group_bytes(g, policy, n, role);
    return bytes;
  };
  // Once every window boundary above has left its clamp at 0 and passed the sink blocks, growing
  // by one block (16 tokens) shifts every boundary by exactly one block: a sliding group's blocks
  // keep their forms, a full group gains one quantized block, so bytes(n + 16) >= bytes(n). Before
  // that, a block leaving a window can lower the bytes by more than the next block adds (a sliding
  // window leaving the bf16 sink blocks, say). So the peak up to `tokens` is the peak of every size
  // up to that point and of the last kKvBlockTokens sizes (tests/kv_footprint_test.cpp checks this
  // against every size).
  int64_t widest = 0;
  for (const KvGroupShape& g : groups) widest = std::max(widest, g.window);
  const int64_t settled =
      2 * policy.recent() + widest + kKvBlockTokens * (blocks_for_tokens(policy.sink()) + 2);
  int64_t peak = 0;
  for (int64_t n = 1; n <= std::min(tokens, settled); ++n) peak = std::max(peak, bytes_at(n));
  for (int64_t n = std::max(settled + 1, tokens - kKvBlockTokens + 1); n <= tokens; ++n) peak = std::max(peak, bytes_at(n));
  return peak;
}

int64_t kv_context_bytes(const ModelSpec& spec, const KvPolicy& policy, int64_t tokens, chat::Role role) {
  const KvLinearLayers linear = kv_linear_layers(spec);
  return kv_context_bytes(kv_group_shapes(spec), policy, tokens, role) + linear.live_bytes() +
         kv_state_snapshots(tokens) * linear.snapshot_bytes();
}

int64_t kv_pass_bytes(std::span<const KvGroupShape> groups, const KvPolicy& policy, int64_t chunk) {
  if (chunk <= 0) return 0;
  // Between passes a block out of the recent window is counted in its final form only; a block
  // that leaves the window during a pass keeps its bf16 rows beside that until the pass ends, and
  // a sliding group keeps the pass's own rows until then. A chunk may straddle a block boundary
  // at either end.
  const int64_t tokens = (blocks_for_tokens(chunk) + 1) * kKvBlockTokens;
  bool quantizes = false;
  for (int r = 0; r < static_cast<int>(chat::kRoleCount); ++r)
    quantizes = quantizes || policy.token_format(static_cast<chat::Role>(r), int64_t{1} << 40) != KvFormat::BF16;
  int64_t bytes = 0;
  for (const KvGroupShape& g : groups)
    if (quantizes || g.window > 0) bytes += tokens * g.token_bytes(KvFormat::BF16);
  return bytes;
}

int64_t kv_pass_bytes(const ModelSpec& spec, const KvPolicy& policy, int64_t chunk) {
  return kv_pass_bytes(kv_group_shapes(spec), policy, chunk);
}

double kv_bytes_per_token(const ModelSpec& spec, const KvPolicy& policy, int64_t tokens, chat::Role role) {
  if (tokens <= 0) throw Error("KV bytes per token needs a positive token count");
  return static_cast<double>(kv_context_bytes(spec, policy, tokens, role)) / static_cast<double>(tokens);
}

}  // namespace keel::kv
