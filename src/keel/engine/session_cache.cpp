#include "keel/engine/session_cache.h"

#include <algorithm>

#include "keel/util/error.h"

namespace keel {

SessionCache::SessionCache(const ModelSpec& spec, int64_t budget_bytes, kv::KvPolicy policy, bool rotate,
                           int64_t context, size_t max_live, const kv::KvDiskOptions& disk, int64_t state_interval)
    : pool_(spec, budget_bytes, std::move(policy), rotate, context, disk, state_interval),
      context_(context),
      max_live_(std::max<size_t>(1, max_live)) {}

SessionCache::~SessionCache() = default;

size_t SessionCache::common_prefix(const kv::KvSequence& live, std::span<const int32_t> prompt,
                                   std::span<const chat::Role> roles) const {
  const auto ids = live.token_ids();
  const auto old_roles = live.token_roles();
  const size_t limit = std::min<size_t>(static_cast<size_t>(live.size()), prompt.empty() ? 0 : prompt.size() - 1);
  const kv::KvPolicy& policy = pool_.policy();
  size_t common = 0;
  while (common < limit && ids[common] == prompt[common] &&
         policy.token_format(old_roles[common], static_cast<int64_t>(common)) ==
             policy.token_format(roles[common], static_cast<int64_t>(common)))
    ++common;
  return common;
}

std::unique_ptr<kv::KvSequence> SessionCache::begin(std::span<const int32_t> prompt, std::span<const chat::Role> roles,
                                                    uint64_t cache_salt, const std::string& affinity) {
  // The candidate: this key's live sequence, or for a keyless turn the keyless one sharing the
  // longest prefix. Another key's sequence is never taken (its agent's next turn would lose it),
  // nor another namespace's.
  auto best = live_.end();
  size_t best_common = 0;
  for (auto it = live_.begin(); it != live_.end(); ++it) {
    if (it->affinity != affinity || it->sequence->cache_salt() != cache_salt) continue;
    const size_t common = common_prefix(*it->sequence, prompt, roles);
    if (best == live_.end() || common > best_common) best = it, best_common = common;
    if (!affinity.empty()) break;  // one live sequence per key
  }
  if (best == live_.end() || best_common == 0) return pool_.open(prompt, roles, cache_salt);

  // The live sequence may share less than the prefix cache holds (the agent went back to an
  // earlier, longer conversation; a cancelled turn left a short one): when the cache may hold more
  // (a look that changes nothing), open from it too and continue whichever reuses more.
  if (pool_.cached_prefix_bound(prompt, roles, cache_salt) > static_cast<int64_t>(best_common)) {
    std::unique_ptr<kv::KvSequence> cached;
    try {
      cached = pool_.open(prompt, roles, cache_salt);
    } catch (const CapacityError&) {
      // No room for a second sequence's state beside the live one: the live one still serves.
    }
    if (cached && static_cast<size_t>(cached->size()) > best_common) {
      best->sequence->publish();  // its complete blocks stay cached, as when it is evicted
      live_.erase(best);
      return cached;
    }
  }
  std::unique_ptr<kv::KvSequence> sequence = std::move(best->sequence);
  live_.erase(best);
  try {
    sequence->trim(static_cast<int64_t>(best_common));
  } catch (const CapacityError&) {
    // Trimming copies a partly kept cached block while the sequence still holds its tail: a
    // sequence that fills the pool leaves no room for that copy. Its complete blocks go to the
    // prefix cache, its tail is freed, and the turn opens from the cache instead.
    sequence->publish();
    sequence.reset();
    return pool_.open(prompt, roles, cache_salt);
  }
  return sequence;
}

void SessionCache::finish(std::unique_ptr<kv::KvSequence> sequence, const std::string& affinity) {
  if (!sequence) return;
  sequence->publish();
  if (!affinity.empty())
    for (auto it = live_.begin(); it != live_.end(); ++it)
      if (it->affinity == affinity) {
        it->sequence->publish();
        live_.erase(it);
        break;
      }
  live_.push_front(Live{affinity, std::move(sequence)});
  while (live_.size() > max_live_) evict_idle();
}

void SessionCache::suspend(std::unique_ptr<kv::KvSequence> sequence) {
  if (sequence) sequence->publish();
}

bool SessionCache::evict_idle() {
  if (live_.empty()) return false;
  live_.back().sequence->publish();
  live_.pop_back();
  return true;
}

int64_t SessionCache::live_tokens() const {
  int64_t n = 0;
  for (const Live& l : live_) n += l.sequence->size();
  return n;
}

}  // namespace keel
