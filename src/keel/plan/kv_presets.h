#pragma once
// The KV policy presets the planner sizes ("full", "int8", "int4", "protect", "protect-k",
// "auto"). They belong to the KV cache (keel/kv/kv_presets.h; kv::KvPolicy::preset turns one into
// the policy the pool runs): plan depends on kv, never the reverse, and names them here without
// the namespace. What each preset stores for a context, the planner asks kv (keel/plan/kv_bytes.h).
// Constants and pure functions: any thread.
#include "keel/kv/kv_presets.h"

namespace keel::plan {

using kv::KvPreset;
using kv::kPresetsByPrecision;
using kv::kProtectRecentTokens;
using kv::kProtectSinkTokens;
using kv::kv_preset_name;
using kv::parse_kv_preset;  // throws keel::Error listing the valid names

}  // namespace keel::plan
