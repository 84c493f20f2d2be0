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

SpecialTokenScope SpecialTokenScope::within(std::span<const ByteRange> ranges) {
  std::vector<ByteRange> sorted;
  sorted.reserve(ranges.size());
  for (const auto& r : ranges)
    if (r.end > r.begin) sorted.push_back(r);
  std::sort(sorted.begin(), sorted.end(), [](const ByteRange& a, const ByteRange& b) { return a.begin < b.begin; });
  std::vector<ByteRange> merged;
  for (const auto& r : sorted) {
    if (!merged.empty() && r.begin <= merged.back().end) merged.back().end = std::max(merged.back().end, r.end);
    else merged.push_back(r);
  }
  return SpecialTokenScope(false, std::move(merged));
}

bool SpecialTokenScope::allows(size_t begin, size_t end) const {
  if (everywhere_) return true;
  // The last range starting at or before `begin` must reach `end`.
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), begin,
                             [](size_t b, const ByteRange& r) { return b < r.begin; });
  if (it == ranges_.begin()) return false;
  --it;
  return begin >= it->begin && end <= it->end && begin < it->end;
}

bool SpecialTokenScope::touches(size_t begin, size_t end) const {
  if (everywhere_) return end > begin;
  // The first range ending after `begin` must start before `end`.
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), begin,
                             [](size_t b, const ByteRange& r) { return b < r.end; });
  return it != ranges_.end() && it->begin < end && begin < end;
}

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

int32_t AddedTokenMatcher::longest_match(std::string_view text, size_t pos, size_t& length,
                                         const SpecialTokenScope* scope) const {
  int32_t best = -1;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto& children = nodes_[node].children;
    auto byte = static_cast<unsigned char>(text[i]);
    auto it = std::lower_bound(children.begin(), children.end(), byte,
                               [](const auto& c, unsigned char b) { return c.first < b; });
    if (it == children.end() || it->first != byte) break;
    node = it->second;
    const int32_t t = nodes_[node].token;
    if (t >= 0 && (scope == nullptr || !tokens_[t].special || scope->allows(pos, i + 1))) {
      best = t;
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
  return split(text, include_special ? SpecialTokenScope::everywhere() : SpecialTokenScope::nowhere());
}

// With a scope, the only change is which special tokens count as matches: with the scope
// everywhere or nowhere this is exactly the loop above, and in a chat prompt whose client-written
// text holds no special token it finds exactly the matches parse_special = true finds.
std::vector<TextSegment> AddedTokenMatcher::split(std::string_view text, const SpecialTokenScope& scope) const {
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
    if (tokens_[t].special && !scope.allows(pos, pos + length)) {
      if (!scope.touches(pos, pos + length)) {
        // Wholly outside the scope: ordinary text, characters used up (Hugging Face's rule for
        // a special token that is not parsed).
        pos += length;
        continue;
      }
      // Straddles the scope's edge: neither a control token nor a reason to swallow the
      // template's markup that follows; take the longest token that may match here, if any.
      t = longest_match(text, pos, length, &scope);
      if (t < 0) {
        ++pos;
        continue;
      }
    }
    const AddedToken& token = tokens_[t];
    size_t begin = pos, end = pos + length;
    pos = end;
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
    if (begin > text_start)
      segments.push_back({std::string(text.substr(text_start, begin - text_start)), -1, text_start, begin});
    segments.push_back({std::string(), token.id, begin, end});
    text_start = std::max(text_start, end);
  }
  if (text_start < text.size()) segments.push_back({std::string(text.substr(text_start)), -1, text_start, text.size()});
  return segments;
}

}  // namespace keel::text
