#pragma once
// One request's view of the KV pool: the KvCache the transformer writes and reads, made of pool
// blocks, some shared with the prefix cache. Created by KvPool::open().
//
// Protocol: before each forward pass, append_tokens() the ids and roles of the tokens it will run
// (the prompt after size(), then each generated token with chat::Role::assistant), then
// prepare_pass(); after a failed pass, set_size(size()). engine/forward_loop.h's run_pass is that
// cycle, and the forward pass's callers use it. When the request ends, publish() offers its
// complete blocks to the prefix cache; destruction releases them.
//
// Threads: see kv_pool.h. store() and set_size() run on the thread driving the forward pass;
// attend() on its workers concurrently (it only reads); the pool's mutex guards the blocks.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "keel/chat/chat_roles.h"
#include "keel/kv/kv_block.h"
#include "keel/kv/kv_cache.h"
#include "keel/kv/kv_pool.h"
#include "keel/util/thread_annotations.h"

namespace keel::kv {

class KvSequence final : public KvCache {
 public:
  ~KvSequence() override;
  KvSequence(const KvSequence&) = delete;
  KvSequence& operator=(const KvSequence&) = delete;

  int64_t capacity() const override;
  int64_t size() const override { return size_; }
  // Throws keel::CapacityError("KV pool exhausted: ...") when a new block finds neither free nor
  // evictable room, and keel::Error when the token at `pos` was not appended first.
  void store(int64_t layer, int64_t pos, const float* k, const float* v) override;
  // A sliding-window layer keeps only its window: params.window must be set and no wider than the
  // layer's (keel::InternalError otherwise); a narrower window just reads fewer rows.
  // Queries whose recent windows read a block in different precisions are attended in separate
  // groups; each query's result is what it would get alone.
  void attend(int64_t layer, int64_t kv_head, std::span<const ops::AttentionQuery> queries,
              const ops::AttentionParams& params) const override;
  // Growing: marks positions complete after a forward pass. n == size(): forgets appended tokens
  // that were not run (after a failed pass; a linear-attention model whose pass failed after a
  // tile boundary also goes back to its latest snapshot, so size() may drop). Shrinking: like
  // trim(n), but throws keel::Error (and changes nothing) when n cannot be kept exactly.
  void set_size(int64_t n) override;
  // Linear-attention layers (keel/kv/kv_pool.h, "Recurrent state").
  ops::LinearLayerState& linear_state(int64_t layer) override;
  float* linear_snapshot(int64_t layer, int64_t pos) override;

  // Ids and roles of the tokens the next forward pass runs, in order.
  void append_tokens(std::span<const int32_t> ids, std::span<const chat::Role> roles);
  // Before the pass over the appended tokens: takes the blocks their rows go to now, and returns
  // the bytes the pass will still take, to quantize the blocks it moves out of the recent window
  // (an upper bound; KvPool::make_room frees them for every sequence of a batch at once). So a
  // pass never runs out of memory halfway: the caller admits, waits or preempts instead. Throws
  // keel::CapacityError when the blocks cannot be had; set_size(size()) gives them back.
  int64_t prepare_pass();
  // Drops everything from position n on and returns the new size(), which is n or less: a linear-
  // attention model resumes inside its live tile or at its latest ready snapshot before n; a block
  // that left the window keeps only its quantized rows, so a cut inside the recent window that
  // would need them at full precision goes back further; a sliding-window layer keeps only the
  // blocks its window reaches from the last block on, so a cut further back than that window goes
  // back to where its rows still are (usually the start). The caller appends and runs the tokens
  // from size() on again.
  int64_t trim(int64_t n);
  // Keeps the rows a branch at size() needs even after this sequence moves on: the full-precision
  // rows of its recent window (and the one before) and, in every sliding-window group, the rows its
  // window reaches. The next turn of a conversation re-renders this prompt and diverges only in the
  // answer, so it reuses the whole prompt instead of recomputing from the start however long the
  // answer was. The rows go when their block is evicted, or when a later mark on this conversation's
  // blocks replaces this one (one kept branch point per conversation). Call it after a prompt's prefill.
  void keep_window_for_branch();
  // Offers the complete blocks to the prefix cache. Blocks stay cached after the sequence is gone
  // until evicted least-recently-used under the budget.
  void publish();

  // Ids and roles of positions [0, size()) plus any appended but not yet run.
  std::span<const int32_t> token_ids() const { return ids_; }
  std::span<const chat::Role> token_roles() const { return roles_; }
  // The pool it was opened from.
  KvPool& pool() const { return pool_; }
  // The cache namespace it was opened in (KvPool::open): its blocks are reused only there.
  uint64_t cache_salt() const { return cache_salt_; }

 private:
  friend class KvPool;
  KvSequence(KvPool& pool, uint64_t cache_salt);

  void publish_locked_scope() KEEL_EXCLUDES(pool_.mu_);  // publish() under the pool's mutex, but the disk copies

  // The *_locked members run with the pool's mutex held.
  int64_t longest_exact_prefix_locked(int64_t n) const KEEL_REQUIRES(pool_.mu_);
  void cut_locked(int64_t m) KEEL_REQUIRES(pool_.mu_);
  KvFormat final_format_locked(int64_t block) KEEL_REQUIRES(pool_.mu_);
  void release_from_locked(size_t first_block) KEEL_REQUIRES(pool_.mu_);
  // Linear-attention layers: the largest p <= m they can resume at exactly (m inside the live tile,
  // else the latest ready snapshot, else 0), and putting their state there. m itself without them.
  int64_t linear_resume_point_locked(int64_t m) const KEEL_REQUIRES(pool_.mu_);
  int64_t resume_linear_locked(int64_t m) KEEL_REQUIRES(pool_.mu_);
  // Whether a snapshot is made at tile boundary `pos` (KvPool's rules), whether it stays while the
  // sequence moves on (an interval one, or the preamble's end), and the block's, allocated.
  bool wants_state_at(int64_t pos) const;
  bool kept_state_at(int64_t pos) const;
  void allocate_state_locked(int64_t pos) KEEL_REQUIRES(pool_.mu_);
  // After a pass reached n: snapshots at or before n are ready; older rolling ones go.
  void settle_states_locked(int64_t n) KEEL_REQUIRES(pool_.mu_);

  KvPool& pool_;
  const uint64_t cache_salt_;
  std::vector<int32_t> ids_;
  std::vector<chat::Role> roles_;
  std::vector<KvBlock*> blocks_;  // each holds one reference
  int64_t size_ = 0;
  size_t pinned_from_ = 0;  // blocks_[pinned_from_:] hold a full-precision pin from this sequence
  std::vector<size_t> window_from_;  // per layer group: blocks_[window_from_[g]:] hold a window pin
                                     // (sliding groups only; 0 for the others)
  std::vector<int64_t> quantized_upto_;  // per layer: blocks below were considered for quantizing
  std::vector<ops::LinearLayerState> linear_;  // per linear-attention layer (KvLinearLayers order)
  std::vector<size_t> rolling_states_;  // blocks whose snapshot only marks this sequence's latest pass
  size_t branch_state_ = SIZE_MAX;      // the block whose snapshot keep_window_for_branch() kept
  bool live_state_counted_ = false;     // linear_'s bytes are in the pool's budget (KvPool::open)
  // roles_[0, preamble_end_) are all scaffolding, system or tools: the request's preamble.
  size_t preamble_end_ = 0;
  void advance_preamble();
};

}  // namespace keel::kv
