#include "keel/text/unicode_normalization.h"

#include <algorithm>
#include <vector>

#include "keel/text/unicode_tables.h"
#include "keel/util/utf8.h"

namespace keel::text {
namespace {

namespace ud = unicode_data;

// Hangul syllables decompose and compose arithmetically (Unicode 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

uint8_t combining_class(char32_t cp) {
  if (cp < 0x300) return 0;
  const auto* end = ud::kCombiningClasses + ud::kCombiningClassCount;
  const auto* it = std::lower_bound(ud::kCombiningClasses, end, cp,
                                    [](const ud::CombiningClass& c, char32_t v) { return c.code_point < v; });
  return it != end && it->code_point == cp ? it->combining_class : 0;
}

void decompose_one(char32_t cp, bool compatibility, std::vector<char32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    char32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (cp < 0xA0) {
    out.push_back(cp);
    return;
  }
  const auto* end = ud::kDecompositions + ud::kDecompositionCount;
  const auto* it = std::lower_bound(ud::kDecompositions, end, cp,
                                    [](const ud::Decomposition& d, char32_t v) { return d.code_point < v; });
  const ud::Decomposition* chosen = nullptr;
  for (; it != end && it->code_point == cp; ++it) {
    if (it->compatibility == 0 || compatibility) chosen = &*it;
  }
  if (!chosen) {
    out.push_back(cp);
    return;
  }
  out.insert(out.end(), ud::kDecompositionPool + chosen->offset,
             ud::kDecompositionPool + chosen->offset + chosen->length);
}

// Canonical ordering: stable sort of every run of non-starters by combining class.
void reorder(std::vector<char32_t>& cps) {
  size_t i = 0;
  while (i < cps.size()) {
    if (combining_class(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < cps.size() && combining_class(cps[j]) != 0) ++j;
    std::stable_sort(cps.begin() + static_cast<long>(i), cps.begin() + static_cast<long>(j),
                     [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }
}

char32_t compose_pair(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  const auto* end = ud::kCompositions + ud::kCompositionCount;
  const auto* it = std::lower_bound(ud::kCompositions, end, std::pair{a, b}, [](const ud::Composition& c, auto v) {
    return c.first != v.first ? c.first < v.first : c.second < v.second;
  });
  return it != end && it->first == a && it->second == b ? it->composite : 0;
}

// Canonical composition: each character composes with the last starter unless blocked by an
// intervening character of equal or higher combining class.
void compose(std::vector<char32_t>& cps) {
  if (cps.empty()) return;
  size_t starter = 0;
  bool have_starter = combining_class(cps[0]) == 0;
  size_t out = 1;
  int last_class = have_starter ? 0 : 256;
  for (size_t i = 1; i < cps.size(); ++i) {
    char32_t cp = cps[i];
    int cls = combining_class(cp);
    bool blocked = out - 1 != starter && (last_class == 0 || last_class >= cls);
    if (have_starter && !blocked) {
      if (char32_t composite = compose_pair(cps[starter], cp)) {
        cps[starter] = composite;
        continue;
      }
    }
    if (cls == 0) {
      starter = out;
      have_starter = true;
    }
    last_class = cls;
    cps[out++] = cp;
  }
  cps.resize(out);
}

std::string normalize_chunk(std::string_view text, NormalizationForm form) {
  bool compatibility = form == NormalizationForm::NFKC || form == NormalizationForm::NFKD;
  std::vector<char32_t> cps;
  cps.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) decompose_one(utf8::decode_at(text, pos), compatibility, cps);
  reorder(cps);
  if (form == NormalizationForm::NFC || form == NormalizationForm::NFKC) compose(cps);
  return utf8::from_code_points(cps);
}

bool is_ascii(char c) { return static_cast<unsigned char>(c) < 0x80; }

// An ASCII character followed by another ASCII character (or the end of the text) is already
// normalized and cannot combine with anything after it.
bool is_boundary(std::string_view text, size_t pos) {
  return is_ascii(text[pos]) && (pos + 1 == text.size() || is_ascii(text[pos + 1]));
}

}  // namespace

std::string normalize_unicode(std::string_view text, NormalizationForm form) {
  // Only the stretches around non-ASCII text need the full decompose-reorder-compose treatment, so
  // mostly-ASCII prompts cost a single pass.
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    if (is_boundary(text, pos)) {
      out += text[pos++];
      continue;
    }
    size_t end = pos + 1;
    while (end < text.size() && !is_boundary(text, end)) ++end;
    out += normalize_chunk(text.substr(pos, end - pos), form);
    pos = end;
  }
  return out;
}

bool is_unicode_whitespace(char32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0x85: case 0xA0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

}  // namespace keel::text
