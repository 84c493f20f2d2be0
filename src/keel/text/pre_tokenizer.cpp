#include "keel/text/pre_tokenizer.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "keel/text/byte_level.h"
#include "keel/text/pattern.h"
#include "keel/util/utf8.h"

namespace keel::text {
namespace {

namespace jf = json_fields;

// GPT-2's word pattern, used by ByteLevel when use_regex is set.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// What happens to the matched delimiters, as in Hugging Face's SplitDelimiterBehavior.
enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

Behavior parse_behavior(const std::string& name, const std::string& where) {
  if (name == "Removed") return Behavior::Removed;
  if (name == "Isolated") return Behavior::Isolated;
  if (name == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::MergedWithNext;
  if (name == "Contiguous") return Behavior::Contiguous;
  jf::fail(where, "unknown split behavior \"" + name + "\"");
}

struct Span {
  size_t begin, end;
  bool is_match;
};

// Cuts `text` at the matches of `pattern`, combining delimiters with their neighbours as
// `behavior` says, and appends the non-empty pieces to `out`.
void split_by(const Pattern& pattern, Behavior behavior, bool invert, const std::string& text,
              std::vector<std::string>& out) {
  std::vector<Span> spans;
  size_t last = 0;
  for (auto [begin, end] : pattern.find_all(text)) {
    if (begin > last) spans.push_back({last, begin, invert});
    spans.push_back({begin, end, !invert});
    last = end;
  }
  if (last < text.size()) spans.push_back({last, text.size(), invert});

  std::vector<Span> merged;
  bool previous_match = false;
  switch (behavior) {
    case Behavior::Removed:
      for (const auto& s : spans)
        if (!s.is_match) merged.push_back(s);
      break;
    case Behavior::Isolated:
      merged = spans;
      break;
    case Behavior::MergedWithPrevious:
      for (const auto& s : spans) {
        if (s.is_match && !previous_match && !merged.empty()) {
          merged.back().end = s.end;
        } else {
          merged.push_back(s);
        }
        previous_match = s.is_match;
      }
      break;
    case Behavior::MergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !merged.empty()) {
          merged.back().begin = it->begin;
        } else {
          merged.push_back(*it);
        }
        previous_match = it->is_match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    case Behavior::Contiguous:
      for (size_t i = 0; i < spans.size(); ++i) {
        if (i > 0 && spans[i].is_match == previous_match) {
          merged.back().end = spans[i].end;
        } else {
          merged.push_back(spans[i]);
        }
        previous_match = spans[i].is_match;
      }
      break;
  }
  for (const auto& s : merged)
    if (s.end > s.begin) out.push_back(text.substr(s.begin, s.end - s.begin));
}

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(Pattern pattern, Behavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void split(std::vector<std::string>& pieces, bool) const override {
    std::vector<std::string> out;
    for (const auto& p : pieces) split_by(pattern_, behavior_, invert_, p, out);
    pieces = std::move(out);
  }

 private:
  Pattern pattern_;
  Behavior behavior_;
  bool invert_;
};

// Maps bytes to GPT-2's printable characters, optionally splitting with GPT-2's own pattern first.
class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space) {
    if (use_regex) pattern_.emplace(Pattern::regex(kGpt2Pattern, "ByteLevel"));
  }
  void split(std::vector<std::string>& pieces, bool) const override {
    std::vector<std::string> words;
    for (auto& p : pieces) {
      if (add_prefix_space_ && !p.empty() && p[0] != ' ') p.insert(p.begin(), ' ');
      if (pattern_) {
        split_by(*pattern_, Behavior::Isolated, false, p, words);
      } else if (!p.empty()) {
        words.push_back(std::move(p));
      }
    }
    for (auto& w : words) w = byte_level::encode(w);
    pieces = std::move(words);
  }

 private:
  bool add_prefix_space_;
  std::optional<Pattern> pattern_;
};

// SentencePiece-style: spaces become the replacement character ("▁"), which starts each word.
class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  enum class Prepend { Always, First, Never };
  MetaspacePreTokenizer(char32_t replacement, Prepend prepend, bool split)
      : replacement_(utf8::encode(replacement)), prepend_(prepend), split_(split) {}
  void split(std::vector<std::string>& pieces, bool at_text_start) const override {
    std::vector<std::string> out;
    Pattern space = Pattern::literal(replacement_);
    for (size_t i = 0; i < pieces.size(); ++i) {
      std::string p = Pattern::literal(" ").replace_all(pieces[i], replacement_);
      bool prepend = prepend_ == Prepend::Always || (prepend_ == Prepend::First && i == 0 && at_text_start);
      if (prepend && p.compare(0, replacement_.size(), replacement_) != 0) p = replacement_ + p;
      if (split_) {
        split_by(space, Behavior::MergedWithNext, false, p, out);
      } else if (!p.empty()) {
        out.push_back(std::move(p));
      }
    }
    pieces = std::move(out);
  }

 private:
  std::string replacement_;
  Prepend prepend_;
  bool split_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void split(std::vector<std::string>& pieces, bool at_text_start) const override {
    for (const auto& step : steps_) step->split(pieces, at_text_start);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

MetaspacePreTokenizer::Prepend parse_prepend_scheme(const jf::Json& config, const std::string& where) {
  if (auto scheme = jf::optional_string(config, "prepend_scheme", where)) {
    if (*scheme == "always") return MetaspacePreTokenizer::Prepend::Always;
    if (*scheme == "first") return MetaspacePreTokenizer::Prepend::First;
    if (*scheme == "never") return MetaspacePreTokenizer::Prepend::Never;
    jf::fail(where + ".prepend_scheme", "expected \"always\", \"first\" or \"never\"");
  }
  // Files written before prepend_scheme existed say add_prefix_space instead.
  return jf::optional_bool(config, "add_prefix_space", true, where) ? MetaspacePreTokenizer::Prepend::Always
                                                                      : MetaspacePreTokenizer::Prepend::Never;
}

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json_fields::Json& config, const std::string& where,
                                                 int depth) {
  if (depth > jf::kMaxNesting) jf::fail(where, "pre-tokenizers nested too deeply");
  std::string type = jf::require_string(config, "type", where);
  if (type == "Split") {
    return std::make_unique<SplitPreTokenizer>(
        Pattern::from_json(jf::require(config, "pattern", where), where + ".pattern"),
        parse_behavior(jf::require_string(config, "behavior", where), where + ".behavior"),
        jf::optional_bool(config, "invert", false, where));
  }
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPreTokenizer>(jf::optional_bool(config, "add_prefix_space", true, where),
                                                   jf::optional_bool(config, "use_regex", true, where));
  }
  if (type == "Digits") {
    bool individual = jf::optional_bool(config, "individual_digits", false, where);
    return std::make_unique<SplitPreTokenizer>(Pattern::regex(individual ? R"(\p{N})" : R"(\p{N}+)", where),
                                               Behavior::Isolated, false);
  }
  if (type == "Metaspace") {
    return std::make_unique<MetaspacePreTokenizer>(jf::single_char(config, "replacement", where),
                                                   parse_prepend_scheme(config, where),
                                                   jf::optional_bool(config, "split", true, where));
  }
  if (type == "Whitespace") {
    return std::make_unique<SplitPreTokenizer>(Pattern::regex(R"(\w+|[^\w\s]+)", where), Behavior::Removed, true);
  }
  if (type == "WhitespaceSplit") {
    return std::make_unique<SplitPreTokenizer>(Pattern::regex(R"(\s+)", where), Behavior::Removed, false);
  }
  if (type == "Sequence") {
    const auto& list = jf::require_array(jf::require(config, "pretokenizers", where), where + ".pretokenizers");
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (size_t i = 0; i < list.size(); ++i)
      steps.push_back(make_pre_tokenizer(list[i], where + ".pretokenizers[" + std::to_string(i) + "]", depth + 1));
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
  }
  jf::fail(where, "unsupported pre_tokenizer type \"" + type + "\"");
}

}  // namespace keel::text
