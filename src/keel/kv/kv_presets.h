#pragma once
// The named KV policy presets users pick (`--kv-policy full|int8|int4|protect|protect-k|auto`) and
// the fixed numbers of `protect` and `protect-k`. What each preset means at run time is KvPolicy::preset() (kv_policy.h);
// the planner (keel/plan/) sizes memory with the same presets. Plain constants and pure functions:
// any thread.
#include <cstdint>
#include <string_view>

namespace keel::kv {

enum class KvPreset { Auto, Full, Int8, ProtectKeys, Protect, Int4 };

// Tokens `protect` keeps at bf16 whatever their role: the first ones (attention sinks) and the
// most recent ones (still being attended to sharply, and not yet quantized).
inline constexpr int64_t kProtectSinkTokens = 4;
inline constexpr int64_t kProtectRecentTokens = 256;
// `protect-k` is `protect` plus keys at bf16 in this many of the earliest layers (where 4-bit keys
// hurt tool calls most; their values follow protect's roles).
inline constexpr int64_t kProtectKeysLayers = 1;

// The concrete presets from most to least precise: the order `auto` tries them in. `protect`
// ranks above `int4` because the two cost almost the same and protect keeps what tool calls
// depend on at full precision; `protect-k` keeps more than protect (early keys) for a little more.
inline constexpr KvPreset kPresetsByPrecision[] = {KvPreset::Full, KvPreset::Int8, KvPreset::ProtectKeys,
                                                   KvPreset::Protect, KvPreset::Int4};

std::string_view kv_preset_name(KvPreset preset);
// "full", "int8", "int4", "protect", "protect-k", "auto"; throws keel::Error listing the valid names.
KvPreset parse_kv_preset(std::string_view name);

}  // namespace keel::kv
