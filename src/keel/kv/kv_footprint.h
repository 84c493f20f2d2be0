#pragma once
// KV memory per token under a policy, as the pool stores it (for `keel bench` and the docs): one
// source of truth with the pool, because both use KvBlockLayout and the same window rule.
#include <cstdint>
#include <span>

#include "keel/chat/chat_roles.h"
#include "keel/kv/kv_policy.h"
#include "keel/model/model_spec.h"

namespace keel::kv {

// Bytes one sequence holds in the pool after its tokens (one role each) have been run: blocks out
// of the last token's recent window in their final format, the window at bf16, the blocks a
// branch inside the window could re-read (full_rows_kept_from) in both, the last block whole.
int64_t kv_sequence_bytes(const ModelSpec& spec, const KvPolicy& policy, std::span<const chat::Role> roles);

// Average bytes per token of a `tokens`-token context whose tokens all have `role`.
double kv_bytes_per_token(const ModelSpec& spec, const KvPolicy& policy, int64_t tokens,
                          chat::Role role = chat::Role::user);

}  // namespace keel::kv
