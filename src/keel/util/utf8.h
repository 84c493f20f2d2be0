#pragma once
// Small UTF-8 helpers shared by the tokenizer and the chat templates. Tokenizer input is sanitized
// to valid UTF-8 first (invalid bytes become U+FFFD), so the tokenizer may assume well-formed text.
// Pure functions of their arguments (decode_at advances the caller's `pos`): any thread.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace keel::utf8 {

// Length of the sequence a lead byte announces (1..4), or 0 for a byte that cannot start one.
size_t sequence_length(unsigned char lead);

// Decodes the code point at `pos` of valid UTF-8 and advances `pos` past it.
char32_t decode_at(std::string_view s, size_t& pos);

void append(std::string& out, char32_t cp);
std::string encode(char32_t cp);

std::vector<char32_t> to_code_points(std::string_view s);
std::string from_code_points(const std::vector<char32_t>& cps);

bool is_valid(std::string_view s);

// Replaces every ill-formed sequence with U+FFFD (one per maximal invalid subpart, as the Unicode
// standard recommends and Python/Rust's lossy decoders do).
std::string sanitize(std::string_view s);

// Length of the longest prefix of `s` that does not end inside a possibly incomplete sequence:
// what a streaming decoder may emit now. Invalid bytes count as complete (they will be replaced).
size_t complete_prefix_length(std::string_view s);

}  // namespace keel::utf8
