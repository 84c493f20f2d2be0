#pragma once
// The prefix-cache namespace (KvPool::open's cache_salt) of a request that presented an API key,
// when the server has two or more: a hash of the key itself, never 0 (the namespace of a server
// with one key or none). Derived from the key rather than its place in --api-key, so a restart
// with the keys in another order (or one more) keeps every key's blocks its own, on disk too
// (--kv-disk): no key ever gets a namespace another key had.
//
// Pure: any thread.
#include <cstdint>
#include <string_view>

namespace keel::api {

inline uint64_t cache_salt_for_key(std::string_view key) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a, then the splitmix64 finalizer
  for (char c : key) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h == 0 ? 1 : h;
}

}  // namespace keel::api
