#pragma once
// Unicode normalization forms (UAX #15) for the NFC/NFD/NFKC/NFKD tokenizer normalizers, and the
// character classes the tokenizer needs outside of regexes.
// Pure functions of their arguments and of read-only tables (unicode_tables.h): any thread.
#include <string>
#include <string_view>

namespace keel::text {

enum class NormalizationForm { NFC, NFD, NFKC, NFKD };

// `text` must be valid UTF-8.
std::string normalize_unicode(std::string_view text, NormalizationForm form);

// Unicode White_Space, as Rust's char::is_whitespace (used by added-token lstrip/rstrip).
bool is_unicode_whitespace(char32_t cp);

}  // namespace keel::text
