#pragma once
// The prefix cache's content address: a hash chain where each block's hash covers its parent's
// hash, its token ids and its format. The chain's root covers the policy and the rotation flag, so
// pools with different policies never share a hash. Hashes only find candidates: the pool compares
// tokens, format and parent identity before reusing a block, so a collision can never be served.
//
// Threads: pure functions: any thread.
#include <cstdint>
#include <span>
#include <string_view>

#include "keel/kv/kv_format_cost.h"

namespace keel::kv {

uint64_t kv_chain_root(std::string_view policy_spec, bool rotate);
// The root of one cache namespace (a cache salt, as vLLM's cache_salt): 0 is `root` itself, any
// other salt a chain no other salt's blocks are on. Blocks also carry their salt, which the pool
// compares, so namespaces never share a block even on a hash collision.
uint64_t kv_salted_root(uint64_t root, uint64_t cache_salt);
uint64_t kv_chain_hash(uint64_t parent, std::span<const int32_t> tokens, KvFormat format);

// A second, independent chain over the same inputs (other mixing constants), which the disk tier
// stores beside the hash and names files by: on disk there is no parent block to compare, so a
// file is served only when both 64-bit chains match (and its salt, format and tokens).
uint64_t kv_check_root(uint64_t salted_root);
uint64_t kv_chain_check(uint64_t parent_check, std::span<const int32_t> tokens, KvFormat format);

}  // namespace keel::kv
