#pragma once
// Finds where a JSON value ends in text that may still be growing. The streaming parsers need
// three answers nlohmann's parser cannot give: "complete, and it ends here" (so a closing marker
// inside a string is not mistaken for the end of a call), "not finished yet" (hold the text), and
// "cannot be JSON" (stop waiting, release it as text or report it). Strict RFC 8259 grammar with a
// nesting limit, so text it calls complete is safe to hand to nlohmann::json::parse.
// Pure functions of the text: any thread.
#include <cstddef>
#include <string>
#include <string_view>

namespace keel::toolcall {

struct JsonScan {
  enum class Status { Complete, Incomplete, Invalid };
  Status status;
  size_t end;         // Complete: one past the value; Invalid: the offending byte; Incomplete: text size
  std::string error;  // Invalid: what was wrong, for ParsedCall::problem
};

constexpr size_t kMaxJsonDepth = 256;

// Scans one value starting at text[pos] (leading whitespace skipped). A number that reaches the
// end of the text is Incomplete: more digits could follow.
JsonScan scan_json_value(std::string_view text, size_t pos);

// Position of the first byte at or after pos that is not JSON whitespace.
size_t skip_json_space(std::string_view text, size_t pos);

}  // namespace keel::toolcall
