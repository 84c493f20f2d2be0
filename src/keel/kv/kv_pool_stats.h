#pragma once
// A snapshot of the KV pool for /health, /metrics and tests.
//
// Threads: a plain value, taken under the pool's lock (KvPool::stats()): copy it freely, read it on
// any thread.
#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>

#include "keel/kv/kv_disk_stats.h"
#include "keel/kv/kv_format_cost.h"

namespace keel::kv {

inline constexpr size_t kKvFormatCount = std::size(kAllKvFormats);

struct KvPoolStats {
  int64_t budget_bytes = 0;
  int64_t used_bytes = 0;  // rows of every live block, all formats (never above budget_bytes)
  std::array<int64_t, kKvFormatCount> bytes_by_format{};  // indexed by static_cast<size_t>(KvFormat)
  int64_t state_bytes = 0;      // of used_bytes: recurrent state, live and snapshots (linear-attention models)
  int64_t state_snapshots = 0;  // blocks carrying one

  int64_t blocks_live = 0;       // blocks holding rows: in use by sequences or cached
  int64_t blocks_in_use = 0;     // held by at least one live sequence
  int64_t blocks_cached = 0;     // published in the prefix cache
  int64_t blocks_evictable = 0;  // cached and held by nothing: freed least-recently-used first
  int64_t blocks_free = 0;       // full-precision blocks the unused budget still holds

  int64_t prefix_hits = 0;    // open() calls that reused at least one block
  int64_t prefix_misses = 0;  // open() calls that reused nothing
  int64_t reused_tokens = 0;  // tokens reused by open(), summed
  int64_t evictions = 0;      // cached blocks freed to make room
  int64_t quantizations = 0;  // (block, layer) pairs quantized from full precision
  int64_t requantizations = 0;  // (block, layer) pairs asked to quantize again: always 0
  int64_t disk_reused_blocks = 0;  // blocks open() brought back from the disk tier into RAM
  KvDiskStats disk;                // the disk tier's counters (disk.enabled false without one)

  int64_t bytes(KvFormat f) const { return bytes_by_format[static_cast<size_t>(f)]; }
  double hit_rate() const {
    const int64_t n = prefix_hits + prefix_misses;
    return n == 0 ? 0.0 : static_cast<double>(prefix_hits) / static_cast<double>(n);
  }
};

}  // namespace keel::kv
