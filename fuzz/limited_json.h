#pragma once
// For fuzz targets that read JSON from their input: parses only what the nesting-limited scanner
// accepts, so the fuzzer cannot build values deep enough to exhaust the stack in nlohmann's
// recursive destructor.
#include <string_view>

#include <nlohmann/json.hpp>

#include "keel/toolcall/json_scan.h"

namespace keel::fuzz {

inline bool parse_limited(std::string_view text, nlohmann::ordered_json& out) {
  const auto scan = keel::toolcall::scan_json_value(text, 0);
  if (scan.status != keel::toolcall::JsonScan::Status::Complete) return false;
  try {
    out = nlohmann::ordered_json::parse(text.substr(0, scan.end));
    return true;
  } catch (const nlohmann::ordered_json::exception&) {
    return false;
  }
}

}  // namespace keel::fuzz
