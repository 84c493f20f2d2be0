#include "keel/engine/session_cache.h"

#include <algorithm>

#include "keel/util/error.h"

namespace keel {

SessionCache::SessionCache(const ModelSpec& spec, int64_t budget_bytes, kv::KvPolicy policy, bool rotate,
                           int64_t context)
    : pool_(spec, budget_bytes, std::move(policy), rotate, context), context_(context) {}

SessionCache::~SessionCache() = default;

int64_t SessionCache::begin(std::span<const int32_t> prompt, std::span<const chat::Role> roles, uint64_t cache_salt) {
  if (live_) {
    // Another namespace's sequence is never continued: it goes to its own prefix cache.
    const bool same_namespace = live_->cache_salt() == cache_salt;
    // Positions are comparable while the token and the format its role asks for both agree: a
    // generated call (assistant) re-rendered as history (tool_call) may be stored differently.
    const auto ids = live_->token_ids();
    const auto old_roles = live_->token_roles();
    const size_t limit = !same_namespace ? 0
                         : std::min<size_t>(static_cast<size_t>(live_->size()), prompt.empty() ? 0 : prompt.size() - 1);
    const kv::KvPolicy& policy = pool_.policy();
    size_t common = 0;
    while (common < limit && ids[common] == prompt[common] &&
           policy.token_format(old_roles[common], static_cast<int64_t>(common)) ==
               policy.token_format(roles[common], static_cast<int64_t>(common)))
      ++common;
    if (common > 0) return live_->trim(static_cast<int64_t>(common));
    live_->publish();
    live_.reset();
  }
  live_ = pool_.open(prompt, roles, cache_salt);
  return live_->size();
}

int64_t SessionCache::truncate(int64_t n) { return sequence().trim(n); }

void SessionCache::publish() {
  if (live_) live_->publish();
}

kv::KvSequence& SessionCache::sequence() {
  if (!live_) throw Error("SessionCache: no request has begun");
  return *live_;
}

int64_t SessionCache::size() const { return live_ ? live_->size() : 0; }

}  // namespace keel
