// Python str semantics the templates rely on: whitespace for strip/split, and case mapping.
// Case mapping covers ASCII and Latin-1 letters, which is what chat templates meet in practice.
#include <cstdint>

#include "keel/chat/jinja_builtins.h"
#include "keel/util/utf8.h"

namespace keel::jinja {
namespace {

// Decodes one UTF-8 code point at s[i], advancing i; invalid bytes decode as themselves.
uint32_t decode(const std::string& s, size_t& i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
  if (i + static_cast<size_t>(len) > s.size()) len = 1;
  uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
  for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + static_cast<size_t>(k)]) & 0x3F);
  i += static_cast<size_t>(len);
  return cp;
}

bool is_space_cp(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

uint32_t upper_cp(uint32_t cp) {
  if (cp >= 'a' && cp <= 'z') return cp - 32;
  if (cp >= 0xE0 && cp <= 0xFE && cp != 0xF7) return cp - 32;
  return cp;
}

uint32_t lower_cp(uint32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return cp + 32;
  if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) return cp + 32;
  return cp;
}

bool is_cased_letter(uint32_t cp) { return upper_cp(cp) != cp || lower_cp(cp) != cp; }

template <typename F>
std::string map_cps(const std::string& s, F f) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  size_t index = 0;
  uint32_t prev = 0;
  while (i < s.size()) {
    uint32_t cp = decode(s, i);
    utf8::append(out, f(cp, index++, prev));
    prev = cp;
  }
  return out;
}

}  // namespace

bool is_python_space(unsigned char c) { return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20); }

std::pair<size_t, size_t> python_strip_range(const std::string& s, const std::string* chars, bool left, bool right) {
  std::vector<uint32_t> set;
  if (chars) {
    for (size_t i = 0; i < chars->size();) set.push_back(decode(*chars, i));
  }
  auto strip_this = [&](uint32_t cp) {
    if (!chars) return is_space_cp(cp);
    for (uint32_t c : set)
      if (c == cp) return true;
    return false;
  };
  std::vector<size_t> starts;
  std::vector<uint32_t> cps;
  for (size_t i = 0; i < s.size();) {
    starts.push_back(i);
    cps.push_back(decode(s, i));
  }
  starts.push_back(s.size());
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_this(cps[b])) ++b;
  if (right)
    while (e > b && strip_this(cps[e - 1])) --e;
  return {starts[b], starts[e]};
}

std::string python_upper(const std::string& s) {
  return map_cps(s, [](uint32_t cp, size_t, uint32_t) { return upper_cp(cp); });
}

std::string python_lower(const std::string& s) {
  return map_cps(s, [](uint32_t cp, size_t, uint32_t) { return lower_cp(cp); });
}

std::string python_title(const std::string& s) {
  return map_cps(s, [](uint32_t cp, size_t index, uint32_t prev) {
    bool word_start = index == 0 || !is_cased_letter(prev);
    return word_start ? upper_cp(cp) : lower_cp(cp);
  });
}

std::string python_capitalize(const std::string& s) {
  return map_cps(s, [](uint32_t cp, size_t index, uint32_t) { return index == 0 ? upper_cp(cp) : lower_cp(cp); });
}

}  // namespace keel::jinja
