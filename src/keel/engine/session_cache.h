#pragma once
// The KV state that outlives requests, on top of the paged pool (keel/kv/kv_pool.h): the live
// sequences of recent turns, each under its affinity key (the agent that sent it), and the pool's
// content-addressed prefix cache behind them. A turn checks a sequence out with begin() and hands
// it back with finish(). A new turn that continues a live sequence of its own key (the next turn
// of the same agent, generated tokens included) trims it to the common prefix and prefills only
// the rest, unless the prefix cache holds a longer prefix, which it then opens; any other opens a sequence from the prefix cache, which every key shares (a subagent
// reuses its parent's system prompt and tools there). Either way the reused tokens give the same
// logits as prefilling them again (DESIGN.md invariant 4).
//
// Live sequences beyond max_live, and those evict_idle() is asked to free, go least recently used
// first: their complete blocks stay in the prefix cache until the pool needs the room.
//
// Threads: begin, finish, suspend, evict_idle, make_room, live_count and live_tokens read or change the live
// sequences, which nothing locks: one thread only (the engine thread in `keel serve`). stats(),
// policy(), rotate() and capacity() may be called from any thread: stats() takes the pool's lock,
// the others never change after construction (/health and /metrics read them).
#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <string>

#include "keel/chat/chat_roles.h"
#include "keel/kv/kv_pool.h"
#include "keel/kv/kv_sequence.h"
#include "keel/model/model_spec.h"

namespace keel {

class SessionCache {
 public:
  // context: the most tokens one request may hold. max_live: how many finished turns keep their
  // sequence live (at least 1). disk: the pool's disk tier (KvPool; none by default).
  // state_interval: the blocks between interval snapshots of a linear-attention model's state (KvPool).
  SessionCache(const ModelSpec& spec, int64_t budget_bytes, kv::KvPolicy policy, bool rotate, int64_t context,
               size_t max_live = 1, const kv::KvDiskOptions& disk = {},
               int64_t state_interval = kv::kDefaultStateInterval);
  ~SessionCache();

  // A sequence holding the longest cached prefix of `prompt` (its size() is the number of tokens
  // reused), at most prompt.size() - 1 tokens so the last prompt token always runs and yields
  // logits. The live sequence of `affinity` is continued when it shares a prefix and the prefix
  // cache holds no longer one; an empty key continues the keyless live sequence that shares the
  // longest prefix, on the same terms. Only what was cached under
  // the same `cache_salt` (KvPool::open) is reused, live sequences included. The caller owns the
  // sequence until finish() or suspend().
  std::unique_ptr<kv::KvSequence> begin(std::span<const int32_t> prompt, std::span<const chat::Role> roles,
                                        uint64_t cache_salt = 0, const std::string& affinity = {});
  // The turn is over: the sequence's complete blocks join the prefix cache and it stays live
  // under `affinity` (replacing that key's older one; an empty key adds a keyless one).
  void finish(std::unique_ptr<kv::KvSequence> sequence, const std::string& affinity);
  // The turn is paused to free memory (preemption): its complete blocks join the prefix cache and
  // the rest is freed; the turn begins again later and recomputes what is gone.
  void suspend(std::unique_ptr<kv::KvSequence> sequence);
  // Ends the least recently used live sequence (its blocks stay cached); false when none is left.
  bool evict_idle();
  // Frees `bytes` of the budget for the pass about to run (KvPool::make_room), or throws
  // keel::CapacityError.
  void make_room(int64_t bytes) { pool_.make_room(bytes); }

  size_t live_count() const { return live_.size(); }
  int64_t live_tokens() const;  // tokens the live sequences hold
  int64_t capacity() const { return context_; }
  kv::KvPoolStats stats() const { return pool_.stats(); }
  const kv::KvPolicy& policy() const { return pool_.policy(); }
  bool rotate() const { return pool_.rotate(); }
  const kv::KvBlockLayout& layout() const { return pool_.layout(); }
  // For the pool's members that take its lock (stats, cached_blocks, events_since, prefix_hashes):
  // any thread.
  const kv::KvPool& pool() const { return pool_; }

 private:
  struct Live {
    std::string affinity;
    std::unique_ptr<kv::KvSequence> sequence;
  };

  // How many leading tokens `live` can keep for `prompt`: the token and the format its role asks
  // for must both agree (a generated call re-rendered as history may be stored differently).
  size_t common_prefix(const kv::KvSequence& live, std::span<const int32_t> prompt,
                       std::span<const chat::Role> roles) const;

  kv::KvPool pool_;
  int64_t context_;
  size_t max_live_;
  std::list<Live> live_;  // most recently finished first
};

}  // namespace keel
