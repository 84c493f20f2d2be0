#pragma once
// The KV policy presets as the planner sees them: for a layer that stores T tokens, how many of
// them sit in each format. The real policy maps renderer roles to formats; at planning time the
// roles are unknown, so `protect` is modelled as its fixed part (sinks and the recent window at
// bf16) plus an int4 bulk. The system prompt and tool schemas it also keeps at bf16, and tool calls
// at int8, are not counted: docs/plan.md says how much they add.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "keel/kv/kv_format_cost.h"

namespace keel::plan {

enum class KvPolicy { Auto, Full, Int8, Protect, Int4 };

// Tokens `protect` keeps at bf16 whatever their role: the first ones (attention sinks) and the
// most recent ones (still being attended to sharply, and not yet quantized).
inline constexpr int64_t kProtectSinkTokens = 4;
inline constexpr int64_t kProtectRecentTokens = 256;

// The concrete presets from most to least precise: the order `auto` tries them in. `protect`
// ranks above `int4` because the two cost almost the same and protect keeps what tool calls
// depend on at full precision.
inline constexpr KvPolicy kPresetsByPrecision[] = {KvPolicy::Full, KvPolicy::Int8, KvPolicy::Protect,
                                                   KvPolicy::Int4};

std::string_view kv_policy_name(KvPolicy policy);
// "full", "int8", "int4", "protect", "auto"; throws keel::Error listing the valid names.
KvPolicy parse_kv_policy(std::string_view name);

struct TokenFormatSplit {
  int64_t bf16 = 0;
  int64_t int8 = 0;
  int64_t int4 = 0;
};

// How `stored_tokens` tokens of one layer split across formats. `windowed` layers (sliding
// window) hold only the latest tokens, so attention sinks are never among them.
TokenFormatSplit split_tokens(KvPolicy policy, int64_t stored_tokens, bool windowed);

}  // namespace keel::plan
