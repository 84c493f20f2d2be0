#pragma once
// The prefix cache as a router outside the process sees it (docs/deploy.md): GET /kv/blocks (every
// cached block's hash), GET /kv/events?after=N (what was stored and removed since), and the hashes
// a prompt's blocks would have (POST /kv/prefix/v1/messages etc., chat_endpoint.cpp). Hashes are
// 16 hex digits (a JSON number would lose bits in JavaScript). `instance` names this process: a
// router that sees it change has followed a restart and starts over from /kv/blocks.
//
// Any HTTP thread: the pool takes its own lock.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "keel/engine/served_model.h"
#include "keel/kv/kv_pool.h"

namespace keel::api {

std::string kv_hash_hex(uint64_t hash);

// {"instance","seq","block_tokens","hashes":[...]}: seq is the last event the list includes.
nlohmann::ordered_json kv_blocks_json(const kv::KvPool& pool, const std::string& instance);
// {"instance","seq","events":[{"seq","type":"stored","hash","parent"} | {"seq","type":"removed","hash"}]},
// at most `limit` events after `after` (seq: the last one sent, or `after` when none), or nothing
// when the reader must start over from /kv/blocks (410).
std::optional<nlohmann::ordered_json> kv_events_json(const kv::KvPool& pool, const std::string& instance,
                                                     uint64_t after, size_t limit);
// {"instance","block_tokens","prompt_tokens","hashes":[...]}: the chain hash of each whole block of
// the prompt (never its last token), in order, as open() would look them up.
nlohmann::ordered_json kv_prefix_json(const kv::KvPool& pool, const std::string& instance,
                                      const PreparedPrompt& prompt, uint64_t cache_salt);

}  // namespace keel::api
