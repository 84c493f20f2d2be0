#pragma once
// KV bytes one sequence holds in the pool, by the pool's own rules (whole blocks, the recent
// window, the rows kept for branches inside it, sliding windows): the one source of KV sizes. The
// pool's byte counts match kv_sequence_bytes() exactly (tests/kv_pool_test.cpp); the planner
// (keel/plan/kv_bytes.h), serve, bench and eval size memory with these functions.
//
// Pure functions: any thread.
#include <cstdint>
#include <span>
#include <vector>

#include "keel/chat/chat_roles.h"
#include "keel/kv/kv_format_cost.h"
#include "keel/kv/kv_policy.h"
#include "keel/model/model_spec.h"

namespace keel::kv {

// `count` vectors of `dim` values per token in one layer (K and V heads; an MLA latent and its rope
// key). Quantization groups run along each vector, so vectors of different widths stay apart.
// key_value: the vectors are K and V heads, half each (a layer-aware policy may store them in
// different formats); otherwise (an MLA latent, a rope key) they all count as keys.
struct KvVectorShape {
  int64_t count = 0;
  int64_t dim = 0;
  bool key_value = false;
};

// Layers that store the same vectors per token and keep the same positions.
struct KvGroupShape {
  int64_t layers = 0;
  std::vector<KvVectorShape> per_token;  // per layer
  int64_t window = 0;                    // > 0: a sliding window of this many positions
  // The model's indices of those layers, which a policy's layer term (layers<N=...) needs to know
  // which of them it covers; may be empty for a policy without one.
  std::vector<int64_t> layer_ids = {};
  // Set on the parts kv_split_by_layer_term() makes: all of them are below the term's N.
  bool under_layer_term = false;

  // One token in every layer of the group, K and V in these forms (one format: both in it).
  int64_t token_bytes(KvFormat format) const { return token_bytes(KvRowForms{format, format}); }
  int64_t token_bytes(KvRowForms forms) const;
};

// The groups as the pool stores them under `policy`: a group with layers on both sides of the
// layer term's N is cut in two (its layer_ids must then be known: keel::Error otherwise).
std::vector<KvGroupShape> kv_split_by_layer_term(std::span<const KvGroupShape> groups, const KvPolicy& policy);

// The groups of a model the pool can store, as kv_layer_groups() forms them (and throws for the
// same models).
std::vector<KvGroupShape> kv_group_shapes(const ModelSpec& spec);

// Bytes one sequence holds after its tokens (one role each) ran from an empty cache, one pass or
// many: per group, the blocks it keeps (every block, or those a sliding window reaches from the
// last block on: window_rows_kept_from), each in its final format once out of the last token's
// recent window, at bf16 inside it, in both forms where a branch inside the window could re-read
// it (full_rows_kept_from); the last block whole.
int64_t kv_sequence_bytes(std::span<const KvGroupShape> groups, const KvPolicy& policy,
                          std::span<const chat::Role> roles);
int64_t kv_sequence_bytes(const ModelSpec& spec, const KvPolicy& policy, std::span<const chat::Role> roles);

// The most a sequence of tokens that all have `role` holds at any size up to `tokens`, between
// forward passes: what one context of `tokens` tokens needs room for. Not always the bytes at
// `tokens` itself: a block that leaves the recent window drops its bf16 rows, so bytes dip. (During
// a pass, blocks that leave a window keep both forms, and a sliding group holds the pass's own
// tokens, until the pass ends.)
int64_t kv_context_bytes(std::span<const KvGroupShape> groups, const KvPolicy& policy, int64_t tokens,
                         chat::Role role = chat::Role::user);
// From a spec, a linear-attention model's recurrent state counts too: the sequence's live state and
// the snapshots it holds at most (kv_state_snapshots, at the default interval).
int64_t kv_context_bytes(const ModelSpec& spec, const KvPolicy& policy, int64_t tokens,
                         chat::Role role = chat::Role::user);

// The most one forward pass of up to `chunk` tokens holds beyond kv_context_bytes (an upper
// bound): when the policy quantizes, the bf16 rows of the blocks that leave the recent window
// during the pass, kept beside their quantized form until it ends; in sliding groups, the pass's
// own rows. A pool that must hold one whole context needs kv_context_bytes + this.
int64_t kv_pass_bytes(std::span<const KvGroupShape> groups, const KvPolicy& policy, int64_t chunk);
int64_t kv_pass_bytes(const ModelSpec& spec, const KvPolicy& policy, int64_t chunk);

// kv_context_bytes() per token: what each token of a `tokens`-token context costs in the budget.
double kv_bytes_per_token(const ModelSpec& spec, const KvPolicy& policy, int64_t tokens,
                          chat::Role role = chat::Role::user);

}  // namespace keel::kv
