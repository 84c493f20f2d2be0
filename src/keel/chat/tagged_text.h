#pragma once
// Text that remembers where its characters came from. The Jinja interpreter is generic: it only
// carries an opaque 8-bit provenance tag (0 = produced by the template itself) through string
// operations, so the chat renderer can map the final output back to message roles.
// A plain value type: const members may run on many threads at once; appending needs one owner.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace keel::jinja {

using Tag = uint8_t;
constexpr Tag kNoTag = 0;

// A byte range [begin, end) of the text that carries `tag`. Runs are sorted, non-overlapping,
// never empty and never carry kNoTag; untagged bytes simply have no run.
struct TagRun {
  size_t begin;
  size_t end;
  Tag tag;
  bool operator==(const TagRun&) const = default;
};

class TaggedText {
 public:
  TaggedText() = default;
  explicit TaggedText(std::string text, Tag tag = kNoTag);

  const std::string& text() const { return text_; }
  const std::vector<TagRun>& runs() const { return runs_; }
  size_t size() const { return text_.size(); }
  bool empty() const { return text_.empty(); }

  void append(std::string_view s, Tag tag = kNoTag);
  void append(const TaggedText& other);
  // The byte range [begin, end) with the runs cropped to it.
  TaggedText slice(size_t begin, size_t end) const;
  // The tag covering the most bytes (kNoTag when nothing is tagged). Used when an operation
  // rewrites a string so thoroughly that byte-level provenance is meaningless (upper, replace...).
  Tag dominant_tag() const;
  // Every byte as one of the runs, with the untagged gaps filled in as kNoTag runs.
  std::vector<TagRun> covering_runs() const;

 private:
  void add_run(size_t begin, size_t end, Tag tag);

  std::string text_;
  std::vector<TagRun> runs_;
};

}  // namespace keel::jinja
