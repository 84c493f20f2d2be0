#pragma once
// One prefix-cache block as the disk tier (keel/kv/kv_disk_tier.h) stores it: its identity in the
// hash chain, its flags, and the rows of each layer group exactly as the pool held them (the
// full-precision bf16 rows and/or the quantized rows of its final format). A block read back is
// the same bytes, so a query reads what it would have read before the block left RAM.
//
// File format (docs/kv-cache.md, "Disk tier"), little-endian:
//   "KEELKVB\0", u32 version, u32 header bytes, u64 namespace (model identity, layout, policy,
//   rotation, SIMD target), u64 hash, check, parent hash, parent check, cache salt, u8 format,
//   u8 full kept for branch, u16 groups, u32 0, i32 tokens[16], then per group u64 full bytes,
//   u64 quantized bytes, u32 quantized layers, u8 kept for branch, 3 zero bytes; then each group's
//   full rows and quantized rows; last a u64 checksum (kv_disk_checksum) of every byte before it.
//
// Pure functions: any thread.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "keel/kv/kv_block_layout.h"
#include "keel/kv/kv_format_cost.h"
#include "keel/kv/kv_window.h"

namespace keel::kv {

// What names a block: the two chain hashes (kv_block_hash.h) of it and of its parent (the salted
// roots for the first block), its namespace, its tokens and format. A file is served only when all
// of it matches what the reader expects.
struct KvDiskBlockId {
  uint64_t hash = 0, check = 0;
  uint64_t parent_hash = 0, parent_check = 0;
  uint64_t cache_salt = 0;
  KvFormat format = KvFormat::BF16;
  std::array<int32_t, kKvBlockTokens> tokens{};
  bool operator==(const KvDiskBlockId&) const = default;
};

struct KvDiskGroupRows {
  std::vector<uint8_t> full;       // empty, or KvBlockLayout::group_bytes(g, BF16)
  std::vector<uint8_t> quantized;  // empty, or group_bytes(g, format)
  int64_t quantized_layers = 0;
  bool kept_for_branch = false;
};

struct KvDiskBlock {
  KvDiskBlockId id;
  bool full_kept_for_branch = false;
  std::vector<KvDiskGroupRows> groups;  // one per layer group
  int64_t row_bytes() const;            // every group's rows, both forms
};

// "<hash><check>.kvb", 32 hex digits: the file of a block in its namespace's folder.
std::string kv_disk_file_name(uint64_t hash, uint64_t check);

// A 64-bit checksum of the bytes (four multiply-rotate lanes, as XXH64; not cryptographic: it
// catches torn writes and flipped bits, not an attacker who can write the folder).
uint64_t kv_disk_checksum(std::span<const uint8_t> bytes);

std::vector<uint8_t> kv_disk_encode(const KvDiskBlock& block, uint64_t namespace_key);

enum class KvDiskDecode {
  Ok,
  Corrupt,     // short, truncated, bad magic or version, bad checksum, sizes that fit no layout
  Mismatched,  // intact, but of another namespace or another block than `expected`
};
// Checks every byte of `file` and that it is `expected` in `namespace_key` with rows shaped by
// `layout`; fills `out` only when Ok.
KvDiskDecode kv_disk_decode(std::span<const uint8_t> file, uint64_t namespace_key, const KvDiskBlockId& expected,
                            const KvBlockLayout& layout, KvDiskBlock& out);

}  // namespace keel::kv
