#include "keel/kv/kv_block_hash.h"

#include "keel/kv/kv_window.h"

namespace keel::kv {
namespace {

// A 64-bit finalizer (the splitmix64 constants): every input bit affects every output bit.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// murmur3's 64-bit finalizer: other constants than mix(), so the two chains are independent.
uint64_t fmix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

}  // namespace

uint64_t kv_chain_root(std::string_view policy_spec, bool rotate) {
  uint64_t h = mix(static_cast<uint64_t>(kKvBlockTokens) * 2 + (rotate ? 1 : 0));
  for (char c : policy_spec) h = mix(h ^ static_cast<uint8_t>(c));
  return h;
}

uint64_t kv_salted_root(uint64_t root, uint64_t cache_salt) {
  if (cache_salt == 0) return root;
  return mix(mix(root ^ 0x73616c74ull) ^ mix(cache_salt));
}

uint64_t kv_chain_hash(uint64_t parent, std::span<const int32_t> tokens, KvFormat format) {
  uint64_t h = mix(parent ^ 0x6b76626c6f636bull);
  for (int32_t t : tokens) h = mix(h ^ static_cast<uint32_t>(t));
  return mix(h ^ static_cast<uint64_t>(format));
}

uint64_t kv_check_root(uint64_t salted_root) { return fmix(fmix(salted_root ^ 0x636865636bull) + 0x2545f4914f6cdd1dull); }

uint64_t kv_chain_check(uint64_t parent_check, std::span<const int32_t> tokens, KvFormat format) {
  uint64_t h = fmix(parent_check + 0x2545f4914f6cdd1dull);
  for (int32_t t : tokens) h = fmix(h + static_cast<uint32_t>(t) * 0x9e3779b97f4a7c15ull + 1);
  return fmix(h ^ (static_cast<uint64_t>(format) + 0x5bd1e995ull));
}

}  // namespace keel::kv
