#include "keel/text/byte_level.h"

#include <array>

#include "keel/util/utf8.h"

namespace keel::text::byte_level {
namespace {

// Printable Latin-1 bytes stand for themselves; the other 68 bytes are moved, in order, to
// U+0100 onwards.
struct Table {
  std::array<std::string, 256> chars;
  std::array<int16_t, 512> bytes_by_cp;  // every table character is below U+0200
  Table() {
    bytes_by_cp.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      char32_t cp = printable ? static_cast<char32_t>(b) : next++;
      chars[b] = utf8::encode(cp);
      bytes_by_cp[cp] = static_cast<int16_t>(b);
    }
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

const std::string& char_for_byte(unsigned char byte) { return table().chars[byte]; }

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += char_for_byte(static_cast<unsigned char>(c));
  return out;
}

std::optional<unsigned char> byte_for_char(char32_t cp) {
  if (cp >= 512) return std::nullopt;
  int16_t b = table().bytes_by_cp[cp];
  if (b < 0) return std::nullopt;
  return static_cast<unsigned char>(b);
}

std::string decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    size_t start = pos;
    char32_t cp = utf8::decode_at(text, pos);
    if (auto b = byte_for_char(cp)) {
      out += static_cast<char>(*b);
    } else {
      out.append(text.substr(start, pos - start));
    }
  }
  return out;
}

}  // namespace keel::text::byte_level
