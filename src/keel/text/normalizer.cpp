#include "keel/text/normalizer.h"

#include <vector>

#include "keel/text/pattern.h"
#include "keel/text/unicode_normalization.h"
#include "keel/util/utf8.h"

namespace keel::text {
namespace {

namespace jf = json_fields;

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalizationForm form) : form_(form) {}
  std::string normalize(std::string_view text) const override { return normalize_unicode(text, form_); }

 private:
  NormalizationForm form_;
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string normalize(std::string_view text) const override { return pattern_.replace_all(text, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

// Prepends to non-empty text only, as SentencePiece-converted tokenizers expect ("▁" + word).
class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string normalize(std::string_view text) const override {
    return text.empty() ? std::string() : prefix_ + std::string(text);
  }

 private:
  std::string prefix_;
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string_view text) const override {
    auto cps = utf8::to_code_points(text);
    size_t begin = 0, end = cps.size();
    if (left_)
      while (begin < end && is_unicode_whitespace(cps[begin])) ++begin;
    if (right_)
      while (end > begin && is_unicode_whitespace(cps[end - 1])) --end;
    return utf8::from_code_points(std::vector<char32_t>(cps.begin() + static_cast<long>(begin),
                                                        cps.begin() + static_cast<long>(end)));
  }

 private:
  bool left_, right_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  std::string normalize(std::string_view text) const override {
    std::string s(text);
    for (const auto& step : steps_) s = step->normalize(s);
    return s;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const json_fields::Json& config, const std::string& where, int depth) {
  if (depth > jf::kMaxNesting) jf::fail(where, "normalizers nested too deeply");
  std::string type = jf::require_string(config, "type", where);
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormalizationForm::NFC);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormalizationForm::NFD);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormalizationForm::NFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormalizationForm::NFKD);
  if (type == "Replace") {
    auto pattern = Pattern::from_json(jf::require(config, "pattern", where), where + ".pattern");
    return std::make_unique<ReplaceNormalizer>(std::move(pattern), jf::require_string(config, "content", where));
  }
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(jf::require_string(config, "prepend", where));
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(jf::optional_bool(config, "strip_left", true, where),
                                             jf::optional_bool(config, "strip_right", true, where));
  }
  if (type == "Sequence") {
    const auto& list = jf::require_array(jf::require(config, "normalizers", where), where + ".normalizers");
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (size_t i = 0; i < list.size(); ++i)
      steps.push_back(make_normalizer(list[i], where + ".normalizers[" + std::to_string(i) + "]", depth + 1));
    return std::make_unique<SequenceNormalizer>(std::move(steps));
  }
  jf::fail(where, "unsupported normalizer type \"" + type + "\"");
}

}  // namespace keel::text
