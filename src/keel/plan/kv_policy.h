#pragma once
// The KV policy presets under the planner's names. The presets belong to the KV cache
// (keel/kv/kv_presets.h): plan depends on kv, never the reverse. What each preset stores for a
// context, the planner asks kv (keel/plan/kv_bytes.h). Constants and pure functions: any thread.
#include <string_view>

#include "keel/kv/kv_presets.h"

namespace keel::plan {

using KvPolicy = kv::KvPreset;
using kv::kPresetsByPrecision;
using kv::kProtectRecentTokens;
using kv::kProtectSinkTokens;

inline std::string_view kv_policy_name(KvPolicy policy) { return kv::kv_preset_name(policy); }
// "full", "int8", "int4", "protect", "auto"; throws keel::Error listing the valid names.
inline KvPolicy parse_kv_policy(std::string_view name) { return kv::parse_kv_preset(name); }

}  // namespace keel::plan
