#include "keel/util/utf8.h"

namespace keel::utf8 {
namespace {

constexpr char32_t kReplacement = 0xFFFD;

bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// The valid range of the second byte after each lead byte (Unicode Table 3-7), which also rules out
// overlong forms and surrogates.
bool second_byte_ok(unsigned char lead, unsigned char b) {
  if (lead == 0xE0) return b >= 0xA0 && b <= 0xBF;
  if (lead == 0xED) return b >= 0x80 && b <= 0x9F;
  if (lead == 0xF0) return b >= 0x90 && b <= 0xBF;
  if (lead == 0xF4) return b >= 0x80 && b <= 0x8F;
  return is_continuation(b);
}

// Length of the valid sequence at `pos`, or 0 with `consumed` set to the length of the maximal
// invalid subpart there. `incomplete` is set when the text ends in the middle of a valid prefix.
size_t valid_sequence_at(std::string_view s, size_t pos, size_t& consumed, bool& incomplete) {
  incomplete = false;
  auto lead = static_cast<unsigned char>(s[pos]);
  size_t need = sequence_length(lead);
  if (need == 1) return 1;
  consumed = 1;
  if (need == 0) return 0;
  for (size_t i = 1; i < need; ++i) {
    if (pos + i >= s.size()) {
      incomplete = true;
      consumed = i;
      return 0;
    }
    auto b = static_cast<unsigned char>(s[pos + i]);
    bool ok = i == 1 ? second_byte_ok(lead, b) : is_continuation(b);
    if (!ok) {
      consumed = i;
      return 0;
    }
  }
  return need;
}

}  // namespace

size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

char32_t decode_at(std::string_view s, size_t& pos) {
  auto lead = static_cast<unsigned char>(s[pos]);
  size_t n = sequence_length(lead);
  if (n <= 1 || pos + n > s.size()) {
    ++pos;
    return n == 1 ? lead : kReplacement;
  }
  char32_t cp = lead & (0x7F >> n);
  for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<unsigned char>(s[pos + i]) & 0x3F);
  pos += n;
  return cp;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string encode(char32_t cp) {
  std::string s;
  append(s, cp);
  return s;
}

std::vector<char32_t> to_code_points(std::string_view s) {
  std::vector<char32_t> cps;
  cps.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) cps.push_back(decode_at(s, pos));
  return cps;
}

std::string from_code_points(const std::vector<char32_t>& cps) {
  std::string s;
  s.reserve(cps.size());
  for (char32_t cp : cps) append(s, cp);
  return s;
}

bool is_valid(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    size_t consumed = 0;
    bool incomplete = false;
    size_t n = valid_sequence_at(s, pos, consumed, incomplete);
    if (n == 0) return false;
    pos += n;
  }
  return true;
}

std::string sanitize(std::string_view s) {
  if (is_valid(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t pos = 0; pos < s.size();) {
    size_t consumed = 0;
    bool incomplete = false;
    size_t n = valid_sequence_at(s, pos, consumed, incomplete);
    if (n > 0) {
      out.append(s.substr(pos, n));
      pos += n;
    } else {
      append(out, kReplacement);
      pos += consumed;
    }
  }
  return out;
}

size_t complete_prefix_length(std::string_view s) {
  // Only the last three bytes can belong to an unfinished sequence.
  size_t start = s.size() > 3 ? s.size() - 3 : 0;
  for (size_t pos = start; pos < s.size(); ++pos) {
    auto b = static_cast<unsigned char>(s[pos]);
    if (is_continuation(b)) continue;
    size_t consumed = 0;
    bool incomplete = false;
    valid_sequence_at(s, pos, consumed, incomplete);
    if (incomplete) return pos;
  }
  return s.size();
}

}  // namespace keel::utf8
