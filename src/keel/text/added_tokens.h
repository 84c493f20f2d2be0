#pragma once
// Added tokens ("added_tokens" in tokenizer.json): strings such as <|im_start|> or <tool_call> that
// are cut out of the input before normalization and BPE and map straight to their id, so that a
// chat template's markers are always encoded exactly.
// Threads: a SpecialTokenScope is an immutable value. An AddedTokenMatcher is filled with add() by one
// thread while the tokenizer loads; after that its const split() may run on many threads at once.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace keel::text {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;       // the match also swallows whitespace on its left
  bool rstrip = false;       // ... and on its right
  bool single_word = false;  // only matches when not inside a word
  bool normalized = false;   // matched against normalized text instead of the raw input
};

// A byte range [begin, end) of a text.
struct ByteRange {
  size_t begin = 0;
  size_t end = 0;
  bool operator==(const ByteRange&) const = default;
};

// Where in a text special added tokens may match: everywhere (parse_special on), nowhere
// (parse_special off), or only inside given byte ranges (a chat prompt: the template's own markup,
// never the text a client wrote). Non-special added tokens are not affected: they match everywhere.
class SpecialTokenScope {
 public:
  static SpecialTokenScope everywhere() { return SpecialTokenScope(true, {}); }
  static SpecialTokenScope nowhere() { return SpecialTokenScope(false, {}); }
  // Ranges of the text in any order; overlapping and touching ranges are merged.
  static SpecialTokenScope within(std::span<const ByteRange> ranges);

  // May a special token match bytes [begin, end)? Only when they all lie inside the scope.
  bool allows(size_t begin, size_t end) const;
  // Does any byte of [begin, end) lie inside the scope?
  bool touches(size_t begin, size_t end) const;

  bool is_everywhere() const { return everywhere_; }
  // The merged, sorted ranges (empty for everywhere and nowhere).
  const std::vector<ByteRange>& ranges() const { return ranges_; }

 private:
  SpecialTokenScope(bool everywhere, std::vector<ByteRange> ranges)
      : everywhere_(everywhere), ranges_(std::move(ranges)) {}
  bool everywhere_;
  std::vector<ByteRange> ranges_;
};

// One piece of the input after cutting out added tokens: either an added token's id, or text
// still to be tokenized.
struct TextSegment {
  std::string text;
  int32_t added_id = -1;  // >= 0 for an added token
  size_t begin = 0;       // where the piece starts in the text that was split
  size_t end = 0;         // ... and ends (for an added token, what it swallowed included)
};

// Finds added tokens in text: at each position the longest token wins, leftmost first.
class AddedTokenMatcher {
 public:
  // `pattern` is how `token` appears in the text it is matched against (its content, normalized
  // when the token is).
  void add(const AddedToken& token, std::string pattern);
  bool empty() const { return nodes_.size() <= 1; }

  // Splits `text`; with `include_special` false, special tokens are left as ordinary text.
  std::vector<TextSegment> split(std::string_view text, bool include_special) const;
  // Splits `text`, matching special tokens only where `scope` allows them. A special token found
  // wholly outside the scope is ordinary text and its characters are used up (exactly as with
  // include_special false); one that straddles the scope's edge is not matched, and the longest
  // token at that position that may match is taken instead (or none).
  std::vector<TextSegment> split(std::string_view text, const SpecialTokenScope& scope) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    int32_t token = -1;                                       // index into tokens_
  };
  // The longest token at `pos` (index into tokens_, or -1). With `scope`, only tokens that may
  // match there: non-special ones, and special ones the scope allows over their bytes.
  int32_t longest_match(std::string_view text, size_t pos, size_t& length,
                        const SpecialTokenScope* scope = nullptr) const;

  std::vector<Node> nodes_{1};
  std::vector<AddedToken> tokens_;
};

}  // namespace keel::text
