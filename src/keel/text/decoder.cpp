#include "keel/text/decoder.h"

#include "keel/text/byte_level.h"
#include "keel/text/pattern.h"
#include "keel/util/utf8.h"

namespace keel::text {

namespace jf = json_fields;

struct Decoder::Step {
  virtual ~Step() = default;
  virtual std::string apply(std::string token, bool first_token) const = 0;
};

namespace {

// Tokens made only of GPT-2 table characters become their bytes; any other token (an added token
// such as "<｜tool▁calls▁begin｜>") is kept as written, as Hugging Face does.
struct ByteLevelStep final : Decoder::Step {
  std::string apply(std::string token, bool) const override {
    std::string bytes;
    bytes.reserve(token.size());
    for (size_t pos = 0; pos < token.size();) {
      auto b = byte_level::byte_for_char(utf8::decode_at(token, pos));
      if (!b) return token;
      bytes += static_cast<char>(*b);
    }
    return bytes;
  }
};

struct ReplaceStep final : Decoder::Step {
  Pattern pattern;
  std::string content;
  ReplaceStep(Pattern p, std::string c) : pattern(std::move(p)), content(std::move(c)) {}
  std::string apply(std::string token, bool) const override { return pattern.replace_all(token, content); }
};

// "<0x41>" stands for the byte 0x41.
struct ByteFallbackStep final : Decoder::Step {
  std::string apply(std::string token, bool) const override {
    if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return token;
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    int hi = hex(token[3]), lo = hex(token[4]);
    if (hi < 0 || lo < 0) return token;
    return std::string(1, static_cast<char>(hi * 16 + lo));
  }
};

// Per-token Strip (before any Fuse): trims each token.
struct StripStep final : Decoder::Step {
  char32_t content;
  size_t start, stop;
  StripStep(char32_t c, size_t b, size_t e) : content(c), start(b), stop(e) {}
  std::string apply(std::string token, bool) const override {
    auto cps = utf8::to_code_points(token);
    size_t begin = 0, end = cps.size();
    while (begin < end && begin < start && cps[begin] == content) ++begin;
    while (end > begin && cps.size() - end < stop && cps[end - 1] == content) --end;
    return utf8::from_code_points(std::vector<char32_t>(cps.begin() + static_cast<long>(begin),
                                                        cps.begin() + static_cast<long>(end)));
  }
};

// The replacement character becomes a space; the space the encoder prepended is dropped again.
struct MetaspaceStep final : Decoder::Step {
  std::string replacement;
  bool drop_first_space;
  MetaspaceStep(char32_t r, bool drop) : replacement(utf8::encode(r)), drop_first_space(drop) {}
  std::string apply(std::string token, bool first_token) const override {
    std::string out = Pattern::literal(replacement).replace_all(token, " ");
    if (first_token && drop_first_space && !out.empty() && out[0] == ' ') out.erase(0, 1);
    return out;
  }
};

struct Builder {
  std::vector<std::unique_ptr<Decoder::Step>> steps;
  bool fused = false;
  char32_t strip_char = 0;
  size_t strip_start = 0;

  void add(const jf::Json& config, const std::string& where, int depth) {
    if (depth > jf::kMaxNesting) jf::fail(where, "decoders nested too deeply");
    std::string type = jf::require_string(config, "type", where);
    if (type == "ByteLevel") {
      steps.push_back(std::make_unique<ByteLevelStep>());
    } else if (type == "Replace") {
      steps.push_back(std::make_unique<ReplaceStep>(
          Pattern::from_json(jf::require(config, "pattern", where), where + ".pattern"),
          jf::require_string(config, "content", where)));
    } else if (type == "ByteFallback") {
      steps.push_back(std::make_unique<ByteFallbackStep>());
    } else if (type == "Fuse") {
      fused = true;
    } else if (type == "Strip") {
      char32_t content = jf::single_char(config, "content", where);
      int64_t start = jf::optional_int(config, "start", 0, where);
      int64_t stop = jf::optional_int(config, "stop", 0, where);
      if (start < 0 || stop < 0 || start > 1'000'000 || stop > 1'000'000) jf::fail(where, "start/stop out of range");
      if (fused) {
        strip_char = content;
        strip_start = static_cast<size_t>(start);
      } else {
        steps.push_back(std::make_unique<StripStep>(content, static_cast<size_t>(start), static_cast<size_t>(stop)));
      }
    } else if (type == "Metaspace") {
      bool drop = true;
      if (auto scheme = jf::optional_string(config, "prepend_scheme", where)) {
        drop = *scheme != "never";
      } else {
        drop = jf::optional_bool(config, "add_prefix_space", true, where);
      }
      steps.push_back(std::make_unique<MetaspaceStep>(jf::single_char(config, "replacement", where), drop));
    } else if (type == "Sequence") {
      const auto& list = jf::require_array(jf::require(config, "decoders", where), where + ".decoders");
      for (size_t i = 0; i < list.size(); ++i)
        add(list[i], where + ".decoders[" + std::to_string(i) + "]", depth + 1);
    } else {
      jf::fail(where, "unsupported decoder type \"" + type + "\"");
    }
  }
};

}  // namespace

Decoder::Decoder() = default;
Decoder::~Decoder() = default;
Decoder::Decoder(Decoder&&) noexcept = default;
Decoder& Decoder::operator=(Decoder&&) noexcept = default;

Decoder Decoder::from_json(const json_fields::Json* config, const std::string& where) {
  Decoder d;
  if (!config) return d;
  Builder b;
  b.add(*config, where, 0);
  d.per_token_ = std::move(b.steps);
  d.strip_char_ = b.strip_char;
  d.strip_start_ = b.strip_start;
  return d;
}

std::string Decoder::decode_token(std::string_view token, State& state) const {
  std::string out(token);
  for (const auto& step : per_token_) out = step->apply(std::move(out), state.first_token);
  state.first_token = false;
  if (strip_start_ > 0 && !state.past_start) {
    std::string strip = utf8::encode(strip_char_);
    size_t cut = 0;
    while (state.leading_stripped < strip_start_ && out.compare(cut, strip.size(), strip) == 0) {
      cut += strip.size();
      ++state.leading_stripped;
    }
    out.erase(0, cut);
    if (!out.empty()) state.past_start = true;
  }
  return out;
}

}  // namespace keel::text
