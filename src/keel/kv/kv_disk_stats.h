#pragma once
// Counters of the KV pool's disk tier (keel/kv/kv_disk_tier.h), for /health, /metrics, bench and
// tests. Plain data: a snapshot taken under the tier's lock.
//
// Threads: a plain value: copy it freely, read it on any thread.
#include <cstdint>

namespace keel::kv {

struct KvDiskStats {
  bool enabled = false;
  int64_t cap_bytes = 0;    // --kv-disk-gb
  int64_t files = 0;        // block files in the folder now (every namespace)
  int64_t bytes = 0;        // their size
  int64_t hits = 0;         // blocks read back into RAM (from a file or the write queue)
  int64_t hit_bytes = 0;    // row bytes those blocks brought back
  int64_t misses = 0;       // lookups that found no file (the chain walk stops there)
  int64_t writes = 0;       // block files written
  int64_t write_bytes = 0;  // their size
  int64_t write_errors = 0;  // writes that failed (disk full, permissions): the block is recomputed
  int64_t dropped = 0;      // blocks not queued because the queue was full (written on eviction)
  int64_t evictions = 0;    // files removed, least recently used first, to stay under the cap
  int64_t corrupt = 0;      // files refused: short, unreadable, bad checksum or malformed (removed)
  int64_t mismatched = 0;   // files refused: another model, policy, rotation or block under this name
  int64_t pending = 0;      // blocks queued for the writer now
  int64_t pending_bytes = 0;
};

}  // namespace keel::kv
