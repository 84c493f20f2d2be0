#pragma once
// GPT-2's byte-to-character table: every byte is shown as a printable code point so that byte-level
// BPE vocabularies can be stored as text ("Ġ" is the space byte 0x20, "Ċ" is "\n").
// Pure functions over a table built once, thread-safely, on first use: any thread. The string
// char_for_byte() returns lives for the whole program.
#include <optional>
#include <string>
#include <string_view>

namespace keel::text::byte_level {

// The UTF-8 text of the character standing for `byte`.
const std::string& char_for_byte(unsigned char byte);

// Maps every byte of `bytes` to its character.
std::string encode(std::string_view bytes);

// The byte a character stands for, if it is one of the 256 table characters.
std::optional<unsigned char> byte_for_char(char32_t cp);

// Inverse of encode(); characters outside the table are kept as their own UTF-8 bytes.
std::string decode(std::string_view text);

}  // namespace keel::text::byte_level
