#pragma once
// One block of the paged pool (internal to KvPool and KvSequence; who may touch what: Threads
// below). A block starts private to the sequence that writes it, holding its rows at full
// precision (bf16). When it leaves a recent window its rows are quantized, once, into its final
// format; when no sequence still reads the full-precision rows they are dropped. In a sliding-window
// layer group, the block's rows (both forms) are dropped once no sequence's window reaches it.
// Published blocks are immutable and shared, keyed by a hash chain over their tokens, formats and
// the policy.
//
// Threads: the bookkeeping fields change, and the pool allocates, fills and frees the row and state
// vectors, only under KvPool's mutex. A forward pass writes the rows and state of its sequence's
// private blocks, and reads what its held blocks hold, without it: holders and pins keep those rows,
// and passes of different sequences never overlap (kv_pool.h).
#include <array>
#include <cstdint>
#include <vector>

#include "keel/kv/kv_format_cost.h"
#include "keel/kv/kv_window.h"

namespace keel::kv {

// The rows of one layer group (KvBlockLayout::groups()) in one block.
struct KvGroupRows {
  // Laid out by KvBlockLayout: [layer of the group][kv_head][K rows | V rows][kKvBlockTokens] rows
  // of row_bytes(format). `full` (bf16) is empty once dropped; `quantized` (the block's format) is
  // empty until the group is quantized (never, when the block's format is bf16) and fills one layer
  // of the group at a time.
  std::vector<uint8_t> full;
  std::vector<uint8_t> quantized;
  int64_t quantized_layers = 0;  // the group's first layers whose quantized rows are written
  // Sliding groups: sequences whose kept window (window_rows_kept_from) still reaches this block.
  // When the last of them moves past it, both forms are freed, unless a turn may branch where the
  // window still reaches it (KvSequence::keep_window_for_branch).
  int64_t window_pins = 0;
  bool kept_for_branch = false;
};

struct KvBlock {
  // Identity in the prefix cache; set when the block is published (cached == true).
  bool cached = false;
  uint64_t hash = 0;
  uint64_t check = 0;         // the second chain (kv_chain_check), which names its file on disk
  bool on_disk = false;       // written to (or read from) the disk tier, as far as the pool knows
  KvBlock* parent = nullptr;  // the cached block before it
  uint64_t cache_salt = 0;    // its namespace (KvPool::open): only sequences of the same salt reuse it
  std::array<int32_t, kKvBlockTokens> tokens{};

  // The most precise format any of its tokens needs; known once the block is complete.
  bool format_known = false;
  KvFormat format = KvFormat::BF16;

  std::vector<KvGroupRows> groups;  // one per layer group

  // Linear-attention models: the recurrent state right after the block's last token (a snapshot,
  // KvLinearLayers' layout, f32), or empty. A reused prefix resumes only after a block whose
  // snapshot is ready (written by every linear layer of a pass that completed).
  std::vector<float> state;
  bool state_ready = false;
  bool state_kept = false;  // an interval snapshot or a branch point: stays while the block does

  int64_t holders = 0;    // sequences holding it
  int64_t children = 0;   // cached blocks naming it as parent (it cannot go before them)
  int64_t full_pins = 0;  // sequences that may still read or quantize its full-precision rows
  bool full_kept_for_branch = false;  // a turn may branch where they are read (keep_window_for_branch)
  uint64_t last_use = 0;  // LRU stamp
};

}  // namespace keel::kv
