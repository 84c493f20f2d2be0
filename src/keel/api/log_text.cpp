#include "keel/api/log_text.h"

namespace keel::api {

std::string log_safe(std::string_view text, size_t limit) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  const std::string_view kept = text.substr(0, limit);
  out.reserve(kept.size());
  for (const char ch : kept) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c < 0x7f) {
      out += ch;
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  if (text.size() > limit) out += "...";
  return out;
}

}  // namespace keel::api
