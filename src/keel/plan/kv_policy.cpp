#include "keel/plan/kv_policy.h"

#include <algorithm>

#include "keel/util/error.h"

namespace keel::plan {

std::string_view kv_policy_name(KvPolicy policy) {
  switch (policy) {
    case KvPolicy::Auto: return "auto";
    case KvPolicy::Full: return "full";
    case KvPolicy::Int8: return "int8";
    case KvPolicy::Protect: return "protect";
    case KvPolicy::Int4: return "int4";
  }
  return "?";
}

KvPolicy parse_kv_policy(std::string_view name) {
  for (KvPolicy p : {KvPolicy::Auto, KvPolicy::Full, KvPolicy::Int8, KvPolicy::Protect, KvPolicy::Int4}) {
    if (name == kv_policy_name(p)) return p;
  }
  throw Error("unknown KV policy '" + std::string(name) + "' (expected full, int8, int4, protect or auto)");
}

TokenFormatSplit split_tokens(KvPolicy policy, int64_t stored_tokens, bool windowed) {
  TokenFormatSplit split;
  const int64_t t = std::max<int64_t>(stored_tokens, 0);
  switch (policy) {
    case KvPolicy::Full:
      split.bf16 = t;
      break;
    case KvPolicy::Int8:
      split.int8 = t;
      break;
    case KvPolicy::Int4:
      split.int4 = t;
      break;
    case KvPolicy::Protect: {
      const int64_t kept = windowed ? kProtectRecentTokens : kProtectSinkTokens + kProtectRecentTokens;
      split.bf16 = std::min(t, kept);
      split.int4 = t - split.bf16;
      break;
    }
    case KvPolicy::Auto:
      throw Error("internal: the auto KV policy must be resolved to a preset before sizing");
  }
  return split;
}

}  // namespace keel::plan
