#include "keel/chat/tagged_text.h"

#include <algorithm>
#include <array>

namespace keel::jinja {

TaggedText::TaggedText(std::string text, Tag tag) : text_(std::move(text)) {
  add_run(0, text_.size(), tag);
}

void TaggedText::add_run(size_t begin, size_t end, Tag tag) {
  if (tag == kNoTag || begin >= end) return;
  if (!runs_.empty() && runs_.back().end == begin && runs_.back().tag == tag) {
    runs_.back().end = end;  // keep runs maximal so equal provenance stays one span
    return;
  }
  runs_.push_back({begin, end, tag});
}

void TaggedText::append(std::string_view s, Tag tag) {
  size_t begin = text_.size();
  text_.append(s);
  add_run(begin, text_.size(), tag);
}

void TaggedText::append(const TaggedText& other) {
  size_t offset = text_.size();
  text_.append(other.text_);
  for (const auto& r : other.runs_) add_run(r.begin + offset, r.end + offset, r.tag);
}

TaggedText TaggedText::slice(size_t begin, size_t end) const {
  TaggedText out;
  end = std::min(end, text_.size());
  if (begin >= end) return out;
  out.text_ = text_.substr(begin, end - begin);
  for (const auto& r : runs_) {
    size_t b = std::max(r.begin, begin), e = std::min(r.end, end);
    if (b < e) out.add_run(b - begin, e - begin, r.tag);
  }
  return out;
}

Tag TaggedText::dominant_tag() const {
  std::array<size_t, 256> bytes{};
  for (const auto& r : runs_) bytes[r.tag] += r.end - r.begin;
  Tag best = kNoTag;
  size_t best_bytes = 0;
  for (size_t t = 1; t < bytes.size(); ++t)
    if (bytes[t] > best_bytes) best = static_cast<Tag>(t), best_bytes = bytes[t];
  return best;
}

std::vector<TagRun> TaggedText::covering_runs() const {
  std::vector<TagRun> out;
  size_t pos = 0;
  for (const auto& r : runs_) {
    if (r.begin > pos) out.push_back({pos, r.begin, kNoTag});
    out.push_back(r);
    pos = r.end;
  }
  if (pos < text_.size()) out.push_back({pos, text_.size(), kNoTag});
  return out;
}

}  // namespace keel::jinja
