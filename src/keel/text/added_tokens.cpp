#include "keel/text/added_tokens.h"

#include <algorithm>

#include "keel/text/regex.h"
#include "keel/text/unicode_normalization.h"
#include "keel/util/utf8.h"

namespace keel::text {
namespace {

// Start of the code point that ends just before `pos`.
size_t previous_char_start(std::string_view s, size_t pos) {
  size_t p = pos - 1;
  while (p > 0 && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
  return p;
}

char32_t char_before(std::string_view s, size_t pos) {
  size_t p = previous_char_start(s, pos);
  return utf8::decode_at(s, p);
}

}  // namespace

void AddedTokenMatcher::add(const AddedToken& token, std::string pattern) {
  if (pattern.empty()) return;
  int32_t node = 0;
  for (char ch : pattern) {
    auto byte = static_cast<unsigned char>(ch);
    auto& children = nodes_[node].children;
    auto it = std::lower_bound(children.begin(), children.end(), byte,
                               [](const auto& c, unsigned char b) { return c.first < b; });
    if (it != children.end() && it->first == byte) {
      node = it->second;
    } else {
      auto next = static_cast<int32_t>(nodes_.size());
      children.insert(it, {byte, next});
      nodes_.emplace_back();
      node = next;
    }
  }
  // A later token with the same text replaces the earlier one, as a later entry in the file would.
  if (nodes_[node].token >= 0) {
    tokens_[nodes_[node].token] = token;
  } else {
    nodes_[node].token = static_cast<int32_t>(tokens_.size());
    tokens_.push_back(token);
  }
}

int32_t AddedTokenMatcher::longest_match(std::string_view text, size_t pos, size_t& length) const {
  int32_t best = -1;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto& children = nodes_[node].children;
    auto byte = static_cast<unsigned char>(text[i]);
    auto it = std::lower_bound(children.begin(), children.end(), byte,
                               [](const auto& c, unsigned char b) { return c.first < b; });
    if (it == children.end() || it->first != byte) break;
    node = it->second;
    if (nodes_[node].token >= 0) {
      best = nodes_[node].token;
      length = i + 1 - pos;
    }
  }
  return best;
}

// Follows Hugging Face's AddedVocabulary exactly, quirks included, so ids match: matches are found
// on the text as written (leftmost, longest, non-overlapping); a match that is then rejected (a
// special token while special tokens are not parsed, or a single_word token inside a word) still
// uses up its characters; lstrip/rstrip widen the token's segment but do not move where the next
// match is searched for.
std::vector<TextSegment> AddedTokenMatcher::split(std::string_view text, bool include_special) const {
  std::vector<TextSegment> segments;
  size_t text_start = 0;  // start of the pending ordinary text
  size_t pos = 0;
  while (pos < text.size()) {
    size_t length = 0;
    int32_t t = longest_match(text, pos, length);
    if (t < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[t];
    size_t begin = pos, end = pos + length;
    pos = end;
    if (token.special && !include_special) continue;
    if (token.single_word) {
      bool word_before = begin > 0 && is_word_character(char_before(text, begin));
      size_t after = end;
      bool word_after = end < text.size() && is_word_character(utf8::decode_at(text, after));
      if (word_before || word_after) continue;
    }
    if (token.lstrip) {
      while (begin > text_start) {
        size_t p = previous_char_start(text, begin);
        size_t q = p;
        if (!is_unicode_whitespace(utf8::decode_at(text, q))) break;
        begin = p;
      }
    }
    if (token.rstrip) {
      while (end < text.size()) {
        size_t q = end;
        if (!is_unicode_whitespace(utf8::decode_at(text, q))) break;
        end = q;
      }
    }
    if (begin > text_start) segments.push_back({std::string(text.substr(text_start, begin - text_start)), -1});
    segments.push_back({std::string(), token.id});
    text_start = std::max(text_start, end);
  }
  if (text_start < text.size()) segments.push_back({std::string(text.substr(text_start)), -1});
  return segments;
}

}  // namespace keel::text
