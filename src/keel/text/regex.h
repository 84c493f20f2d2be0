#pragma once
// A compiled PCRE2 pattern with Unicode properties (UTF + UCP), used by Split pre-tokenizers and
// Replace normalizers/decoders. Patterns come from tokenizer.json files written for Oniguruma/Rust
// regex; the constructs those files use (\p{L}, \p{N}, (?i:...), lookahead) mean the same in PCRE2.
// Threads: a Regex is immutable after construction; find_all() makes its own match data per call, so
// many threads may use one Regex at once. is_word_character() is a pure function: any thread.
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace keel::text {

class Regex {
 public:
  // Throws keel::Error naming `where` when the pattern does not compile.
  Regex(std::string_view pattern, const std::string& where);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;

  // Byte ranges [begin, end) of every non-overlapping, non-empty match in valid UTF-8 `text`.
  // A match that needs pathological backtracking throws keel::Error instead of hanging.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Whether `cp` is a word character in the Unicode sense that tokenizer.json regexes give \w
// (letters, letter numbers, marks, decimal digits, connector punctuation, joiners). Used by added tokens'
// single_word check, which Hugging Face also makes with \w.
bool is_word_character(char32_t cp);

}  // namespace keel::text
