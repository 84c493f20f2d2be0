#pragma once
// The `pattern` field of Split pre-tokenizers and Replace normalizers/decoders:
// {"String": "literal"} or {"Regex": "..."}.
// Immutable after construction: its const members may be called from many threads at once.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "keel/text/json_fields.h"
#include "keel/text/regex.h"

namespace keel::text {

class Pattern {
 public:
  static Pattern from_json(const json_fields::Json& value, const std::string& where);
  static Pattern literal(std::string text);
  static Pattern regex(std::string_view pattern, const std::string& where);

  // Byte ranges of the non-overlapping, non-empty matches in `text`.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

  // `text` with every match replaced by `content`.
  std::string replace_all(std::string_view text, std::string_view content) const;

 private:
  std::string literal_;
  std::optional<Regex> regex_;
};

}  // namespace keel::text
