#pragma once
// The KV state that outlives requests, on top of the paged pool (keel/kv/kv_pool.h). The live
// sequence of the last request stays open: a new request that continues it (the next turn of the
// same conversation, generated tokens included) trims it to the common prefix and prefills only
// the rest; any other request opens a sequence from the pool's prefix cache. Either way the reused
// tokens give the same logits as prefilling them again (DESIGN.md invariant 4).
//
// Threads: begin, truncate, publish, sequence and size read or change the live sequence, which
// nothing locks: one thread only (the engine thread in `keel serve`, inside queued jobs). stats(),
// policy(), rotate() and capacity() may be called from any thread: stats() takes the pool's lock,
// the others never change after construction (/health and /metrics read them).
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "keel/chat/chat_roles.h"
#include "keel/kv/kv_pool.h"
#include "keel/kv/kv_sequence.h"
#include "keel/model/model_spec.h"

namespace keel {

class SessionCache {
 public:
  // context: the most tokens one request may hold.
  SessionCache(const ModelSpec& spec, int64_t budget_bytes, kv::KvPolicy policy, bool rotate, int64_t context);
  ~SessionCache();

  // Keeps the longest cached prefix of `prompt`, at most prompt.size() - 1 tokens so the last
  // prompt token always runs and yields logits. Returns the number of tokens reused. Only what was
  // cached under the same `cache_salt` (KvPool::open) is reused, the live sequence included: a
  // request of another namespace starts from that namespace's prefix cache.
  int64_t begin(std::span<const int32_t> prompt, std::span<const chat::Role> roles, uint64_t cache_salt = 0);

  // Drops everything from position n on; returns the new size, which may be smaller than n when a
  // cut inside the recent window needs rows that were already quantized (rerun from there).
  int64_t truncate(int64_t n);
  // The request is over: its complete blocks join the prefix cache.
  void publish();

  // The current request's sequence, for engine/forward_loop; throws keel::Error before begin().
  kv::KvSequence& sequence();
  int64_t size() const;
  int64_t capacity() const { return context_; }
  kv::KvPoolStats stats() const { return pool_.stats(); }
  const kv::KvPolicy& policy() const { return pool_.policy(); }
  bool rotate() const { return pool_.rotate(); }

 private:
  kv::KvPool pool_;
  int64_t context_;
  std::unique_ptr<kv::KvSequence> live_;
};

}  // namespace keel
