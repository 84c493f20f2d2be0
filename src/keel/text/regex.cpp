#define PCRE2_CODE_UNIT_WIDTH 8
#include "keel/text/regex.h"

#include <pcre2.h>

#include <algorithm>

#include "keel/util/utf8.h"
#include "keel/util/error.h"

namespace keel::text {

namespace {
// Bounds on backtracking so a hostile pattern in a tokenizer file fails instead of hanging.
constexpr uint32_t kMatchLimit = 10'000'000;
constexpr uint32_t kDepthLimit = 100'000;

// tokenizer.json patterns are written for Oniguruma, where \s is Unicode White_Space and \w is
// Unicode's word characters. PCRE2's UCP classes differ at the edges (its \s also matches U+180E,
// its \w misses combining marks), which changes how real text is split. So these escapes are
// spelled out as explicit classes before compiling.
constexpr const char* kSpaceItems =
    R"(\t\n\x{0B}\f\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";
// Word = Alphabetic (letters, letter numbers such as Ⅻ, circled letters) + marks + decimal digits
// + connector punctuation.
constexpr const char* kWordItems =
    R"(\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}\x{24B6}-\x{24E9}\x{1F130}-\x{1F149}\x{1F150}-\x{1F169}\x{1F170}-\x{1F189})";

std::string with_oniguruma_classes(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 64);
  bool in_class = false;
  size_t class_start = 0;  // position just after "[" or "[^", where "]" is still a literal
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      char e = pattern[i + 1];
      const char* items = (e == 's' || e == 'S') ? kSpaceItems : (e == 'w' || e == 'W') ? kWordItems : nullptr;
      bool negated = e == 'S' || e == 'W';
      if (items && !in_class) {
        out += negated ? "[^" : "[";
        out += items;
        out += ']';
      } else if (items && !negated) {
        out += items;
      } else if (e == 'Q') {
        // \Q...\E quotes everything up to \E verbatim.
        size_t end = pattern.find("\\E", i + 2);
        size_t stop = end == std::string_view::npos ? pattern.size() : end + 2;
        out.append(pattern.substr(i, stop - i));
        i = stop - 1;
        continue;
      } else {
        out += c;
        out += e;
      }
      ++i;
      continue;
    }
    out += c;
    if (!in_class && c == '[') {
      in_class = true;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      class_start = i + 1;
    } else if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      // A POSIX class such as [:alpha:] inside a class: copy through its closing ":]".
      size_t end = pattern.find(":]", i + 2);
      if (end != std::string_view::npos) {
        out.append(pattern.substr(i + 1, end + 1 - i));
        i = end + 1;
      }
    } else if (in_class && c == ']' && i != class_start) {
      in_class = false;
    }
  }
  return out;
}

}  // namespace

struct Regex::Impl {
  pcre2_code* code = nullptr;
  pcre2_match_context* context = nullptr;
  std::string where;
  ~Impl() {
    if (context) pcre2_match_context_free(context);
    if (code) pcre2_code_free(code);
  }
};

Regex::Regex(std::string_view pattern, const std::string& where) : impl_(std::make_unique<Impl>()) {
  impl_->where = where;
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  std::string translated = with_oniguruma_classes(pattern);
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                              PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    throw Error(where + ": invalid regex at offset " + std::to_string(error_offset) + ": " +
                reinterpret_cast<const char*>(message));
  }
  // JIT is an optimization only; the interpreter gives the same answers where it is unavailable.
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);
  impl_->context = pcre2_match_context_create(nullptr);
  pcre2_set_match_limit(impl_->context, kMatchLimit);
  pcre2_set_depth_limit(impl_->context, kDepthLimit);
}

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  pcre2_match_data* data = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  if (!data) throw Error(impl_->where + ": out of memory for regex match");
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t offset = 0;
  while (offset <= text.size()) {
    // The input was validated once by the tokenizer, so skip PCRE2's per-call UTF check.
    int rc = pcre2_match(impl_->code, subject, text.size(), offset, PCRE2_NO_UTF_CHECK, data, impl_->context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(data);
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      throw Error(impl_->where + ": regex match failed: " + reinterpret_cast<const char*>(message));
    }
    PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    size_t begin = ovector[0], end = ovector[1];
    if (end > begin) {
      matches.emplace_back(begin, end);
      offset = end;
    } else {
      // Empty match: step over one whole character so we never split a UTF-8 sequence.
      size_t at = std::max(begin, offset);
      if (at >= text.size()) break;
      size_t step = 1;
      while (at + step < text.size() && (static_cast<unsigned char>(text[at + step]) & 0xC0) == 0x80) ++step;
      offset = at + step;
    }
  }
  pcre2_match_data_free(data);
  return matches;
}

bool is_word_character(char32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  // Rust's regex crate, which Hugging Face uses for this check, also counts the zero-width joiners.
  if (cp == 0x200C || cp == 0x200D) return true;
  static const Regex word(R"(^\w)", "word character class");
  return !word.find_all(utf8::encode(cp)).empty();
}

}  // namespace keel::text
