#include "keel/api/kv_routes.h"

#include <cstdio>

#include "keel/kv/kv_window.h"

namespace keel::api {

std::string kv_hash_hex(uint64_t hash) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

namespace {

nlohmann::ordered_json hex_list(const std::vector<uint64_t>& hashes) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (uint64_t h : hashes) out.push_back(kv_hash_hex(h));
  return out;
}

}  // namespace

nlohmann::ordered_json kv_blocks_json(const kv::KvPool& pool, const std::string& instance) {
  const kv::KvPool::CachedBlocks blocks = pool.cached_blocks();
  return {{"instance", instance},
          {"seq", blocks.seq},
          {"block_tokens", kv::kKvBlockTokens},
          {"hashes", hex_list(blocks.hashes)}};
}

std::optional<nlohmann::ordered_json> kv_events_json(const kv::KvPool& pool, const std::string& instance,
                                                     uint64_t after, size_t limit) {
  const auto events = pool.events_since(after, limit);
  if (!events) return std::nullopt;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const kv::KvBlockEvent& e : *events) {
    if (e.kind == kv::KvBlockEvent::Kind::Stored)
      list.push_back({{"seq", e.seq}, {"type", "stored"}, {"hash", kv_hash_hex(e.hash)}, {"parent", kv_hash_hex(e.parent)}});
    else
      list.push_back({{"seq", e.seq}, {"type", "removed"}, {"hash", kv_hash_hex(e.hash)}});
  }
  return nlohmann::ordered_json{
      {"instance", instance}, {"seq", events->empty() ? after : events->back().seq}, {"events", std::move(list)}};
}

nlohmann::ordered_json kv_prefix_json(const kv::KvPool& pool, const std::string& instance,
                                      const PreparedPrompt& prompt, uint64_t cache_salt) {
  return {{"instance", instance},
          {"block_tokens", kv::kKvBlockTokens},
          {"prompt_tokens", prompt.ids.size()},
          {"hashes", hex_list(pool.prefix_hashes(prompt.ids, prompt.roles, cache_salt))}};
}

}  // namespace keel::api
