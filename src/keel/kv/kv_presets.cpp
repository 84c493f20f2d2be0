#include "keel/kv/kv_presets.h"

#include <string>

#include "keel/util/error.h"

namespace keel::kv {

std::string_view kv_preset_name(KvPreset preset) {
  switch (preset) {
    case KvPreset::Auto: return "auto";
    case KvPreset::Full: return "full";
    case KvPreset::Int8: return "int8";
    case KvPreset::ProtectKeys: return "protect-k";
    case KvPreset::Protect: return "protect";
    case KvPreset::Int4: return "int4";
  }
  return "?";
}

KvPreset parse_kv_preset(std::string_view name) {
  for (KvPreset p : {KvPreset::Auto, KvPreset::Full, KvPreset::Int8, KvPreset::ProtectKeys, KvPreset::Protect,
                     KvPreset::Int4}) {
    if (name == kv_preset_name(p)) return p;
  }
  throw Error("unknown KV policy '" + std::string(name) + "' (expected full, int8, int4, protect, protect-k or auto)");
}

}  // namespace keel::kv
