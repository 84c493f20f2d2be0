#pragma once
// The paged KV pool: one budget in bytes for the K/V rows of every sequence of one model, blocks of
// kKvBlockTokens tokens (keel/kv/kv_window.h), a role-aware precision policy (keel/kv/kv_policy.h)
// and an exact prefix cache. See docs/kv-cache.md.
//
// Exactness (DESIGN.md invariant 4): what a query at position p reads of token j is a pure function
// of the tokens, their roles, the policy, j and p. Token j's block is read at full precision while
// it is inside p's recent window (or its format is bf16), else from its quantized form, which is
// computed once, from the full-precision rows, when the block first leaves a window. So chunked and
// one-shot prefill, a reused prefix and a trimmed and re-extended sequence all give the same bits.
//
// Layers are stored in groups (keel/kv/kv_layer_groups.h). A sliding-window group keeps only the
// blocks that its window still reaches from the sequence's next positions (window_rows_kept_from);
// rows freed there are never read again by that sequence, and a cached block that lost them is
// reused only where the new sequence's queries cannot reach them (see open()).
//
// Recurrent state (linear-attention layers, keel/ops/gated_delta_rule.h): such a layer keeps no
// rows but a fixed-size state per sequence (KvSequence::linear_state). A block may carry a snapshot
// of the state after its last token (KvBlock::state): after every state_interval-th block, at the
// last block boundary of the preamble (the leading scaffolding, system and tools tokens, which agents
// sharing a system prompt and tools have in common), after the last complete block a sequence's
// latest pass reached (replaced as it moves on), and where a prompt ended (keep_window_for_branch). Snapshots live and go with their block, are shared with it and
// count against the budget; the disk tier does not keep them. open() and trim() resume at the
// latest ready snapshot at or before the point where the rows would let them resume (or inside the
// live tile, which needs none) and run the rest again: the tile form of the delta rule makes that
// bit-identical to a fresh prefill.
//
// Thread-safety: every public member of KvPool and the structural members of KvSequence (open,
// publish, trim, set_size, destruction) may run on different threads; stats() never blocks for
// long. Forward passes of different sequences must not overlap (one engine thread runs them in turn).
// All sequences must be destroyed before their pool.
//
// Disk tier (keel/kv/kv_disk_tier.h, optional): a block is offered to it when it is published (a
// copy, queued to the tier's writer thread, so a crash or SIGTERM loses little; publish() makes
// the copies after it let the lock go, taking it for one block at a time), again when RAM
// evicts it if the folder no longer has it (its rows move to the writer), and at destruction for
// every cached block the folder lacks. open() continues the chain walk on disk where RAM ends,
// reading files without the pool's lock; a block read back counts against the budget like any
// other and holds exactly the rows it held when written, so reuse stays exact.
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <unordered_map>
#include <utility>

#include "keel/chat/chat_roles.h"
#include "keel/kv/kv_block.h"
#include "keel/kv/kv_block_layout.h"
#include "keel/kv/kv_disk_tier.h"
#include "keel/kv/kv_events.h"
#include "keel/kv/kv_policy.h"
#include "keel/kv/kv_pool_stats.h"
#include "keel/model/model_spec.h"
#include "keel/util/thread_annotations.h"

namespace keel::kv {

class KvSequence;

class KvPool {
 public:
  // rotate: Walsh-Hadamard rotation for the formats below 8 bits (`--kv-rotate`). max_context caps
  // each sequence's capacity() (0: the model's max_position). Throws keel::Error when the budget
  // cannot hold one block, the policy quantizes a head_dim that is not a multiple of 32, or the
  // model has layers the pool cannot store (kv_layer_groups(): the message names the layers).
  // `disk`: the disk tier's folder, cap and the model's identity (none when disk.dir is empty;
  // throws keel::Error when the folder cannot be created).
  // state_interval: linear-attention models keep a snapshot of the recurrent state after every
  // state_interval-th block (`--kv-state-interval`), besides each sequence's latest and its branch
  // point (see "Recurrent state" below); ignored by models without linear layers.
  KvPool(const ModelSpec& spec, int64_t budget_bytes, KvPolicy policy, bool rotate, int64_t max_context = 0,
         const KvDiskOptions& disk = {}, int64_t state_interval = kDefaultStateInterval);
  // Offers the disk tier every cached block it lacks, and waits until they are written.
  ~KvPool();
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  // A sequence whose cache already holds the longest cached prefix of `tokens`: whole blocks whose
  // hash chain (token ids, roles-derived formats, policy) matches, at most tokens.size() - 1 tokens
  // so the last token always runs, minus whatever must be recomputed because the next query would
  // read rows that are gone: full-precision rows dropped inside the recent window, or rows of a
  // sliding-window layer dropped inside that layer's window (then, since every earlier position
  // needs the rows before it, usually from the start). Its size() is the number of reused tokens;
  // the caller appends and prefills tokens[size():].
  // roles has one entry per token. `cache_salt` names the sequence's cache namespace: it reuses
  // and publishes only blocks of the same salt (0: the namespace every caller shared before salts).
  std::unique_ptr<KvSequence> open(std::span<const int32_t> tokens, std::span<const chat::Role> roles,
                                   uint64_t cache_salt = 0);
  // At least as many tokens as open() would reuse for the same arguments (the whole blocks cached
  // in RAM, then on disk), found without touching anything: no pins, no LRU order, no counters, no
  // disk reads, no memory. SessionCache asks it before opening a second sequence beside a live one.
  int64_t cached_prefix_bound(std::span<const int32_t> tokens, std::span<const chat::Role> roles,
                              uint64_t cache_salt = 0) const;

  // Evicts least-recently-used cached blocks until `bytes` more fit the budget (the sum of
  // KvSequence::prepare_pass over a batch); throws keel::CapacityError when live sequences hold
  // too much for that.
  void make_room(int64_t bytes);

  // The prefix cache as a router outside the process sees it (kv_events.h, docs/deploy.md): every
  // cached block's hash, with the number of the last event the list includes; the events after a
  // number (at most `limit`), or nothing when the reader must take a new list; and the hashes
  // open() would look up for a prompt, in order. None of them changes the cache.
  struct CachedBlocks {
    uint64_t seq = 0;
    std::vector<uint64_t> hashes;
  };
  CachedBlocks cached_blocks() const;
  std::optional<std::vector<KvBlockEvent>> events_since(uint64_t after, size_t limit) const;
  std::vector<uint64_t> prefix_hashes(std::span<const int32_t> tokens, std::span<const chat::Role> roles,
                                      uint64_t cache_salt = 0) const;

  KvPoolStats stats() const;
  int64_t budget_bytes() const { return budget_; }
  const KvPolicy& policy() const { return policy_; }
  bool rotate() const { return rotate_; }
  const KvBlockLayout& layout() const { return layout_; }
  const ModelSpec& spec() const { return spec_; }
  int64_t max_context() const { return max_context_; }
  int64_t state_interval() const { return state_interval_; }

 private:
  friend class KvSequence;

  // The *_locked members run with mu_ held (KEEL_REQUIRES: clang checks every caller).
  KvBlock* new_block_locked() KEEL_REQUIRES(mu_);  // private, full-precision rows allocated, held and pinned once
  KvBlock* copy_block_locked(const KvBlock& src) KEEL_REQUIRES(mu_);  // a private copy of src's full-precision rows
  // Evicts least-recently-used cached blocks, or throws CapacityError.
  void reserve_locked(size_t bytes) KEEL_REQUIRES(mu_);
  void add_bytes_locked(KvFormat format, int64_t delta) KEEL_REQUIRES(mu_);
  void free_rows_locked(std::vector<uint8_t>& rows, KvFormat format) KEEL_REQUIRES(mu_);
  // A group's quantized rows of a block of `format` (K and V counted in their own forms).
  void add_quantized_bytes_locked(int64_t group, KvFormat format, const std::vector<uint8_t>& rows, int sign)
      KEEL_REQUIRES(mu_);
  void free_quantized_locked(int64_t group, KvFormat format, std::vector<uint8_t>& rows) KEEL_REQUIRES(mu_);
  void quantize_layer_locked(KvBlock& block, int64_t layer) KEEL_REQUIRES(mu_);
  void drop_full_if_unneeded_locked(KvBlock& block) KEEL_REQUIRES(mu_);
  void pin_window_locked(KvBlock& block, int64_t group) KEEL_REQUIRES(mu_) {
    ++block.groups[static_cast<size_t>(group)].window_pins;
  }
  void unpin_window_locked(KvBlock& block, int64_t group) KEEL_REQUIRES(mu_);  // the last pin frees the group's rows
  void free_window_rows_locked(KvBlock& block, int64_t group) KEEL_REQUIRES(mu_);
  void hold_locked(KvBlock& block) KEEL_REQUIRES(mu_);
  void release_locked(KvBlock& block) KEEL_REQUIRES(mu_);
  void settle_locked(KvBlock& block) KEEL_REQUIRES(mu_);  // unreferenced: evictable if cached, else freed
  static bool evictable(const KvBlock& b) { return b.cached && b.holders == 0 && b.children == 0; }
  void unpin_locked(KvBlock& block) KEEL_REQUIRES(mu_);
  void touch_locked(KvBlock& block) KEEL_REQUIRES(mu_) { block.last_use = ++clock_; }
  void evict_locked(KvBlock& block) KEEL_REQUIRES(mu_);
  void destroy_locked(KvBlock& block) KEEL_REQUIRES(mu_);
  // A block's recurrent-state snapshot: allocated (counted; may evict, or throw CapacityError) and dropped.
  void allocate_state_locked(KvBlock& block) KEEL_REQUIRES(mu_);
  void drop_state_locked(KvBlock& block) KEEL_REQUIRES(mu_);
  KvBlock* find_cached_locked(uint64_t hash, const KvBlock* parent, std::span<const int32_t> tokens, KvFormat format,
                              uint64_t cache_salt) const KEEL_REQUIRES(mu_);
  // Each whole block of `tokens` (never the last token) as the chains name it: hash, check, format.
  std::vector<KvDiskBlockId> block_chain(std::span<const int32_t> tokens, std::span<const chat::Role> roles,
                                         uint64_t cache_salt) const;
  void insert_cached_locked(KvBlock& block, uint64_t hash, KvBlock* parent, std::span<const int32_t> tokens,
                            uint64_t cache_salt) KEEL_REQUIRES(mu_);
  bool rotated(KvFormat format) const;
  // The disk tier's form of a cached block; take_rows moves its rows out (it is being evicted).
  KvDiskBlock disk_block_locked(KvBlock& block, bool take_rows) KEEL_REQUIRES(mu_);
  // Queues the block for the disk unless the folder has it: a copy if it stays (take_rows false,
  // dropped when the queue is full), else its rows.
  void offer_to_disk_locked(KvBlock& block, bool take_rows) KEEL_REQUIRES(mu_);
  // Copies the blocks published since the last call to the disk tier, taking the lock for one
  // block at a time (KvSequence::publish, after it let the lock go).
  void offer_published_to_disk() KEEL_EXCLUDES(mu_);
  // A cached block made from what the disk tier read, its bytes counted (throws CapacityError
  // before changing anything when the budget cannot take them).
  KvBlock* adopt_disk_block_locked(KvDiskBlock&& data, KvBlock* parent) KEEL_REQUIRES(mu_);

  const ModelSpec spec_;
  const KvBlockLayout layout_;
  const int64_t budget_;
  const KvPolicy policy_;
  const bool rotate_;
  const int64_t max_context_;
  const uint64_t chain_root_;
  const int64_t state_interval_;

  mutable Mutex mu_;
  std::unordered_map<const KvBlock*, std::unique_ptr<KvBlock>> blocks_ KEEL_GUARDED_BY(mu_);  // every live block
  std::unordered_multimap<uint64_t, KvBlock*> cached_ KEEL_GUARDED_BY(mu_);                  // by chain hash
  std::set<std::pair<uint64_t, KvBlock*>> evictable_ KEEL_GUARDED_BY(mu_);                   // by LRU stamp
  uint64_t clock_ KEEL_GUARDED_BY(mu_) = 0;
  int64_t used_ KEEL_GUARDED_BY(mu_) = 0;
  std::array<int64_t, kKvFormatCount> bytes_by_format_ KEEL_GUARDED_BY(mu_){};
  int64_t state_bytes_ KEEL_GUARDED_BY(mu_) = 0, state_snapshots_ KEEL_GUARDED_BY(mu_) = 0;
  int64_t prefix_hits_ KEEL_GUARDED_BY(mu_) = 0, prefix_misses_ KEEL_GUARDED_BY(mu_) = 0;
  int64_t reused_tokens_ KEEL_GUARDED_BY(mu_) = 0, evictions_ KEEL_GUARDED_BY(mu_) = 0;
  int64_t quantizations_ KEEL_GUARDED_BY(mu_) = 0, requantizations_ KEEL_GUARDED_BY(mu_) = 0;
  int64_t disk_reused_blocks_ KEEL_GUARDED_BY(mu_) = 0;
  KvEventLog events_ KEEL_GUARDED_BY(mu_);  // blocks entering and leaving cached_

  // Published blocks not yet offered to the disk tier (offer_published_to_disk), with their hashes:
  // one evicted meanwhile is gone from blocks_ (its rows were queued when it went).
  std::deque<std::pair<KvBlock*, uint64_t>> disk_offers_ KEEL_GUARDED_BY(mu_);
  std::unique_ptr<KvDiskTier> disk_;  // null without a disk tier; thread-safe on its own
};

}  // namespace keel::kv

// KvSequence's lock annotations name KvPool's mutex, so its class needs KvPool's first; whoever
// includes this header gets both.
#include "keel/kv/kv_sequence.h"
