// tojson as transformers defines it: json.dumps(x, ensure_ascii=False, indent=indent,
// separators=separators, sort_keys=sort_keys). Output must match Python byte for byte, so floats
// use Python's repr and only the characters json.dumps escapes are escaped.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "keel/chat/jinja_builtins.h"
#include "keel/chat/jinja_error.h"

namespace keel::jinja {
namespace {

// A UTF-16 code unit as \\uXXXX (lowercase hex, as Python's json.dumps writes it).
void append_u_escape(std::string& out, uint32_t unit) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(unit >> shift) & 0xF];
}

std::string json_escape(const std::string& s, bool ensure_ascii) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (ensure_ascii && c >= 0x80) {
      int len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
      if (i + static_cast<size_t>(len) > s.size()) len = 1;
      uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
      for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + static_cast<size_t>(k)]) & 0x3F);
      i += static_cast<size_t>(len - 1);
      if (cp >= 0x10000) {
        cp -= 0x10000;
        append_u_escape(out, 0xD800 + (cp >> 10));
        append_u_escape(out, 0xDC00 + (cp & 0x3FF));
      } else {
        append_u_escape(out, cp);
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

class JsonWriter {
 public:
  explicit JsonWriter(const JsonStyle& style) : style_(style) {}

  void write(const Value& v, int level) {
    if (level > 200) fail("ValueError", "tojson: value nested too deeply");
    switch (v.kind()) {
      case Value::Kind::None:
        out_.append("null", v.tag());
        return;
      case Value::Kind::Bool:
        out_.append(v.as_bool() ? "true" : "false", v.tag());
        return;
      case Value::Kind::Int:
        out_.append(std::to_string(v.as_int()), v.tag());
        return;
      case Value::Kind::Float: {
        double f = v.as_double();
        if (std::isnan(f)) out_.append("NaN", v.tag());
        else if (std::isinf(f)) out_.append(f > 0 ? "Infinity" : "-Infinity", v.tag());
        else out_.append(python_float_repr(f), v.tag());
        return;
      }
      case Value::Kind::String:
        out_.append(json_escape(v.as_string(), style_.ensure_ascii), v.as_tagged().dominant_tag());
        return;
      case Value::Kind::List: {
        if (v.is_generator()) break;
        const auto& items = v.as_list();
        if (items.empty()) {
          out_.append("[]", v.tag());
          return;
        }
        out_.append("[", v.tag());
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out_.append(style_.item_separator, v.tag());
          newline(level + 1, v.tag());
          write(items[i], level + 1);
        }
        newline(level, v.tag());
        out_.append("]", v.tag());
        return;
      }
      case Value::Kind::Dict: {
        if (v.is_namespace()) break;
        std::vector<const std::pair<std::string, Value>*> items;
        for (const auto& kv : v.as_dict().items()) items.push_back(&kv);
        if (style_.sort_keys)
          std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
        if (items.empty()) {
          out_.append("{}", v.tag());
          return;
        }
        out_.append("{", v.tag());
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out_.append(style_.item_separator, v.tag());
          newline(level + 1, v.tag());
          out_.append(json_escape(items[i]->first, style_.ensure_ascii), v.tag());
          out_.append(style_.key_separator, v.tag());
          write(items[i]->second, level + 1);
        }
        newline(level, v.tag());
        out_.append("}", v.tag());
        return;
      }
      default:
        break;
    }
    std::string type = v.is_undefined() ? "Undefined" : v.type_name();
    fail("TypeError", "Object of type " + type + " is not JSON serializable");
  }

  TaggedText take() { return std::move(out_); }

 private:
  void newline(int level, Tag tag) {
    if (style_.indent < 0) return;
    std::string line = "\n";
    line.append(static_cast<size_t>(style_.indent) * static_cast<size_t>(level), ' ');
    out_.append(line, tag);
  }

  const JsonStyle& style_;
  TaggedText out_;
};

}  // namespace

TaggedText to_json(const Value& v, const JsonStyle& style) {
  JsonWriter w(style);
  w.write(v, 0);
  return w.take();
}

}  // namespace keel::jinja
