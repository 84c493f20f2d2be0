#include "keel/toolcall/gemma_args.h"

#include "keel/toolcall/json_scan.h"

namespace keel::toolcall {
namespace {

using nlohmann::ordered_json;

constexpr int kMaxDepth = 64;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool ends_scalar(char c) { return c == ',' || c == '}' || c == ']' || c == '<' || is_space(c); }

class GemmaReader {
 public:
  explicit GemmaReader(std::string_view text) : t_(text) {}

  enum class R { Ok, Short, Bad };

  R value(size_t& i, ordered_json& out, int depth) {
    skip(i);
    if (i >= t_.size()) return R::Short;
    if (depth > kMaxDepth) return bad(i, "nesting deeper than " + std::to_string(kMaxDepth));
    const char c = t_[i];
    if (c == '<') {
      std::string s;
      R r = quoted(i, s);
      if (r == R::Ok) out = std::move(s);
      return r;
    }
    if (c == '"') return json_string(i, out);
    if (c == '{') return object(i, out, depth);
    if (c == '[') return array(i, out, depth);
    return scalar(i, out);
  }

  size_t bad_at = 0;
  std::string error;

 private:
  void skip(size_t& i) const {
    while (i < t_.size() && is_space(t_[i])) ++i;
  }

  R bad(size_t at, std::string what) {
    bad_at = at;
    error = std::move(what) + " at byte " + std::to_string(at);
    return R::Bad;
  }

  R quoted(size_t& i, std::string& out) {
    const std::string_view rest = t_.substr(i);
    if (rest.size() < kGemmaQuote.size()) {
      return kGemmaQuote.substr(0, rest.size()) == rest ? R::Short : bad(i, "unexpected '<'");
    }
    if (rest.substr(0, kGemmaQuote.size()) != kGemmaQuote) return bad(i, "unexpected '<'");
    const size_t close = t_.find(kGemmaQuote, i + kGemmaQuote.size());
    if (close == std::string_view::npos) return R::Short;
    out = std::string(t_.substr(i + kGemmaQuote.size(), close - i - kGemmaQuote.size()));
    i = close + kGemmaQuote.size();
    return R::Ok;
  }

  R json_string(size_t& i, ordered_json& out) {
    const JsonScan scan = scan_json_value(t_, i);
    if (scan.status == JsonScan::Status::Incomplete) return R::Short;
    if (scan.status == JsonScan::Status::Invalid) return bad(scan.end, scan.error);
    try {
      out = ordered_json::parse(t_.substr(i, scan.end - i));
    } catch (const ordered_json::exception& e) {
      return bad(i, std::string("bad string: ") + e.what());
    }
    i = scan.end;
    return R::Ok;
  }

  R key(size_t& i, std::string& out) {
    skip(i);
    if (i >= t_.size()) return R::Short;
    if (t_[i] == '<') return quoted(i, out);
    if (t_[i] == '"') {
      ordered_json s;
      R r = json_string(i, s);
      if (r == R::Ok) out = s.get<std::string>();
      return r;
    }
    const size_t start = i;
    while (i < t_.size() && t_[i] != ':' && !ends_scalar(t_[i]) && t_[i] != '{' && t_[i] != '[') ++i;
    if (i >= t_.size()) return R::Short;
    if (i == start) return bad(i, "expected a key");
    out = std::string(t_.substr(start, i - start));
    return R::Ok;
  }

  R object(size_t& i, ordered_json& out, int depth) {
    out = ordered_json::object();
    ++i;
    skip(i);
    if (i >= t_.size()) return R::Short;
    if (t_[i] == '}') {
      ++i;
      return R::Ok;
    }
    while (true) {
      std::string k;
      if (R r = key(i, k); r != R::Ok) return r;
      skip(i);
      if (i >= t_.size()) return R::Short;
      if (t_[i] != ':') return bad(i, "expected ':' after key \"" + k + "\"");
      ++i;
      ordered_json v;
      if (R r = value(i, v, depth + 1); r != R::Ok) return r;
      out[k] = std::move(v);
      skip(i);
      if (i >= t_.size()) return R::Short;
      if (t_[i] == '}') {
        ++i;
        return R::Ok;
      }
      if (t_[i] != ',') return bad(i, "expected ',' or '}'");
      ++i;
    }
  }

  R array(size_t& i, ordered_json& out, int depth) {
    out = ordered_json::array();
    ++i;
    skip(i);
    if (i >= t_.size()) return R::Short;
    if (t_[i] == ']') {
      ++i;
      return R::Ok;
    }
    while (true) {
      ordered_json v;
      if (R r = value(i, v, depth + 1); r != R::Ok) return r;
      out.push_back(std::move(v));
      skip(i);
      if (i >= t_.size()) return R::Short;
      if (t_[i] == ']') {
        ++i;
        return R::Ok;
      }
      if (t_[i] != ',') return bad(i, "expected ',' or ']'");
      ++i;
    }
  }

  R scalar(size_t& i, ordered_json& out) {
    const size_t start = i;
    while (i < t_.size() && !ends_scalar(t_[i]) && t_[i] != ':' && t_[i] != '{' && t_[i] != '[') ++i;
    // Reaching the end of the text, the scalar may go on.
    if (i >= t_.size()) return R::Short;
    if (i == start) return bad(i, "expected a value");
    const std::string_view token = t_.substr(start, i - start);
    const JsonScan scan = scan_json_value(std::string(token) + " ", 0);
    if (scan.status == JsonScan::Status::Complete && scan.end == token.size()) {
      try {
        out = ordered_json::parse(token);
        return R::Ok;
      } catch (const ordered_json::exception&) {
      }
    }
    out = std::string(token);
    return R::Ok;
  }

  std::string_view t_;
};

}  // namespace

GemmaValue parse_gemma_value(std::string_view text, size_t pos) {
  GemmaReader reader(text);
  ordered_json value;
  size_t i = pos;
  switch (reader.value(i, value, 0)) {
    case GemmaReader::R::Ok: return {GemmaValue::Status::Complete, std::move(value), i, ""};
    case GemmaReader::R::Short: return {GemmaValue::Status::Incomplete, nullptr, text.size(), ""};
    case GemmaReader::R::Bad: break;
  }
  return {GemmaValue::Status::Invalid, nullptr, reader.bad_at, reader.error};
}

}  // namespace keel::toolcall
