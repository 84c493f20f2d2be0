#pragma once
// Added tokens ("added_tokens" in tokenizer.json): strings such as <|im_start|> or <tool_call> that
// are cut out of the input before normalization and BPE and map straight to their id, so that a
// chat template's markers are always encoded exactly.
#include <cstdint>
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

// One piece of the input after cutting out added tokens: either an added token's id, or text
// still to be tokenized.
struct TextSegment {
  std::string text;
  int32_t added_id = -1;  // >= 0 for an added token
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

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    int32_t token = -1;                                       // index into tokens_
  };
  int32_t longest_match(std::string_view text, size_t pos, size_t& length) const;

  std::vector<Node> nodes_{1};
  std::vector<AddedToken> tokens_;
};

}  // namespace keel::text
