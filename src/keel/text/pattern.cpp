#include "keel/text/pattern.h"

namespace keel::text {

Pattern Pattern::from_json(const json_fields::Json& value, const std::string& where) {
  json_fields::require_object(value, where);
  if (const auto* s = json_fields::find(value, "String")) return literal(json_fields::as_string(*s, where + ".String"));
  if (const auto* r = json_fields::find(value, "Regex"))
    return regex(json_fields::as_string(*r, where + ".Regex"), where + ".Regex");
  json_fields::fail(where, "expected {\"String\": ...} or {\"Regex\": ...}");
}

Pattern Pattern::literal(std::string text) {
  Pattern p;
  p.literal_ = std::move(text);
  return p;
}

Pattern Pattern::regex(std::string_view pattern, const std::string& where) {
  Pattern p;
  p.regex_.emplace(pattern, where);
  return p;
}

std::vector<std::pair<size_t, size_t>> Pattern::find_all(std::string_view text) const {
  if (regex_) return regex_->find_all(text);
  std::vector<std::pair<size_t, size_t>> matches;
  if (literal_.empty()) return matches;
  for (size_t pos = text.find(literal_); pos != std::string_view::npos; pos = text.find(literal_, pos)) {
    matches.emplace_back(pos, pos + literal_.size());
    pos += literal_.size();
  }
  return matches;
}

std::string Pattern::replace_all(std::string_view text, std::string_view content) const {
  std::string out;
  size_t last = 0;
  for (auto [begin, end] : find_all(text)) {
    out.append(text.substr(last, begin - last));
    out.append(content);
    last = end;
  }
  out.append(text.substr(last));
  return out;
}

}  // namespace keel::text
