// Python methods on str, dict and list. Methods that would mutate a list or dict are refused with
// the SecurityError jinja2's immutable sandbox raises (transformers renders in that sandbox), so
// a template that relies on list.append fails here exactly where it fails there.
#include <algorithm>
#include <set>

#include "keel/chat/jinja_args.h"
#include "keel/chat/jinja_builtins.h"
#include "keel/chat/jinja_error.h"

namespace keel::jinja {
namespace {

const std::set<std::string>& string_methods() {
  static const std::set<std::string> names = {
      "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith", "replace", "upper",
      "lower", "title", "capitalize", "find", "rfind", "index", "rindex", "count", "join", "format", "isdigit",
      "isalpha", "isalnum", "isspace", "isupper", "islower", "isnumeric", "isdecimal", "zfill", "removeprefix",
      "removesuffix", "casefold", "swapcase", "center", "ljust", "rjust", "partition", "rpartition", "encode"};
  return names;
}
const std::set<std::string>& dict_methods() {
  static const std::set<std::string> names = {"get", "items", "keys", "values", "copy",
                                              "pop", "popitem", "setdefault", "update", "clear"};
  return names;
}
const std::set<std::string>& list_methods() {
  static const std::set<std::string> names = {"index", "count", "copy", "append", "pop", "extend",
                                              "insert", "remove", "sort", "reverse", "clear"};
  return names;
}

[[noreturn]] void unsafe(const Value& self, const std::string& name) {
  fail("SecurityError", "access to attribute '" + name + "' of '" + self.type_name() + "' object is unsafe.");
}

const std::string& require_string(const Value& v, const std::string& what) {
  if (!v.is_string()) fail("TypeError", what + " must be str, not " + v.type_name());
  return v.as_string();
}

// Python split: with no separator, runs of whitespace separate and empty pieces are dropped.
std::vector<Value> split_string(const TaggedText& t, const Value& sep_v, int64_t maxsplit, bool from_right) {
  const std::string& s = t.text();
  std::vector<std::pair<size_t, size_t>> pieces;
  if (sep_v.is_none() || sep_v.is_undefined()) {
    std::vector<std::pair<size_t, size_t>> words;
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && is_python_space(static_cast<unsigned char>(s[i]))) ++i;
      if (i >= s.size()) break;
      size_t b = i;
      while (i < s.size() && !is_python_space(static_cast<unsigned char>(s[i]))) ++i;
      words.emplace_back(b, i);
    }
    if (maxsplit < 0 || static_cast<size_t>(maxsplit) + 1 >= words.size()) {
      pieces = words;
    } else if (!from_right) {
      pieces.assign(words.begin(), words.begin() + maxsplit);
      size_t rest = words[static_cast<size_t>(maxsplit)].first;
      auto range = python_strip_range(s.substr(rest), nullptr, false, true);
      pieces.emplace_back(rest, rest + range.second);
    } else {
      size_t keep = words.size() - static_cast<size_t>(maxsplit);
      auto range = python_strip_range(s.substr(0, words[keep - 1].second), nullptr, true, false);
      pieces.emplace_back(range.first, words[keep - 1].second);
      pieces.insert(pieces.end(), words.begin() + static_cast<long>(keep), words.end());
    }
  } else {
    const std::string& sep = require_string(sep_v, "separator");
    if (sep.empty()) fail("ValueError", "empty separator");
    std::vector<size_t> hits;
    for (size_t p = s.find(sep); p != std::string::npos; p = s.find(sep, p + sep.size())) hits.push_back(p);
    if (maxsplit >= 0 && hits.size() > static_cast<size_t>(maxsplit)) {
      if (from_right) hits.erase(hits.begin(), hits.end() - maxsplit);
      else hits.resize(static_cast<size_t>(maxsplit));
    }
    size_t start = 0;
    for (size_t h : hits) {
      pieces.emplace_back(start, h);
      start = h + sep.size();
    }
    pieces.emplace_back(start, s.size());
  }
  std::vector<Value> out;
  for (auto [b, e] : pieces) out.push_back(Value::string(t.slice(b, e)));
  return out;
}

std::vector<Value> split_lines(const TaggedText& t, bool keepends) {
  const std::string& s = t.text();
  std::vector<Value> out;
  size_t start = 0, i = 0;
  while (i < s.size()) {
    size_t len = 0;
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') len = 2;
    else if (c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E)) len = 1;
    if (len == 0) {
      ++i;
      continue;
    }
    out.push_back(Value::string(t.slice(start, keepends ? i + len : i)));
    i += len;
    start = i;
  }
  if (start < s.size()) out.push_back(Value::string(t.slice(start, s.size())));
  return out;
}

// str.format with {} / {0} / {name} fields; format specs are not supported.
Value format_string(const Value& self, const CallArgs& args) {
  const std::string& f = self.as_string();
  TaggedText out;
  Tag own = self.as_tagged().dominant_tag();
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    char c = f[i];
    if ((c == '{' || c == '}') && i + 1 < f.size() && f[i + 1] == c) {
      out.append(std::string(1, c), own);
      ++i;
      continue;
    }
    if (c != '{') {
      out.append(std::string(1, c), own);
      continue;
    }
    size_t close = f.find('}', i);
    if (close == std::string::npos) fail("ValueError", "Single '{' encountered in format string");
    std::string field = f.substr(i + 1, close - i - 1);
    if (field.find(':') != std::string::npos || field.find('!') != std::string::npos)
      fail("ValueError", "format specifications are not supported in str.format");
    const Value* v = nullptr;
    if (field.empty()) {
      if (auto_index >= args.positional.size()) fail("IndexError", "Replacement index out of range for positional args tuple");
      v = &args.positional[auto_index++];
    } else if (std::all_of(field.begin(), field.end(), ::isdigit)) {
      size_t k = std::stoul(field);
      if (k >= args.positional.size()) fail("IndexError", "Replacement index out of range for positional args tuple");
      v = &args.positional[k];
    } else {
      for (const auto& [name, value] : args.named)
        if (name == field) v = &value;
      if (!v) fail("KeyError", "'" + field + "'");
    }
    out.append(v->to_text());
    i = close;
  }
  return Value::string(std::move(out));
}

Value string_method(const Value& self, const std::string& name, const CallArgs& a) {
  const TaggedText& t = self.as_tagged();
  const std::string& s = t.text();
  Tag own = t.dominant_tag();
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    BoundArgs args(a, name, {"chars"});
    const Value& chars = args.get(0);
    const std::string* set = chars.is_string() ? &chars.as_string() : nullptr;
    auto [b, e] = python_strip_range(s, set, name != "rstrip", name != "lstrip");
    return Value::string(t.slice(b, e));
  }
  if (name == "split" || name == "rsplit") {
    BoundArgs args(a, name, {"sep", "maxsplit"});
    int64_t maxsplit = args.has(1) ? args.get(1).as_int() : -1;
    return Value::list(split_string(t, args.get_or(0, Value::none()), maxsplit, name == "rsplit"));
  }
  if (name == "splitlines") {
    BoundArgs args(a, name, {"keepends"});
    return Value::list(split_lines(t, args.get(0).truthy()));
  }
  if (name == "startswith" || name == "endswith") {
    BoundArgs args(a, name, {"prefix", "start", "end"});
    std::vector<Value> options = args.get(0).is_list() ? args.get(0).as_list() : std::vector<Value>{args.get(0)};
    for (const auto& o : options) {
      const std::string& p = require_string(o, name + " argument");
      if (p.size() > s.size()) continue;
      if (name == "startswith" ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0)
        return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  if (name == "replace") {
    BoundArgs args(a, name, {"old", "new", "count"});
    const std::string& from = require_string(args.get(0), "replace() argument 1");
    const std::string& to = require_string(args.get(1), "replace() argument 2");
    int64_t count = args.has(2) ? args.get(2).as_int() : -1;
    TaggedText out;
    size_t pos = 0;
    int64_t done = 0;
    if (from.empty()) {
      // Python inserts the replacement between every character.
      auto chars = self.iterate();
      for (const auto& ch : chars) {
        if (count < 0 || done < count) out.append(args.get(1).as_tagged()), ++done;
        out.append(ch.as_tagged());
      }
      if (count < 0 || done < count) out.append(args.get(1).as_tagged());
      return Value::string(std::move(out));
    }
    while (count < 0 || done < count) {
      size_t hit = s.find(from, pos);
      if (hit == std::string::npos) break;
      out.append(t.slice(pos, hit));
      out.append(to, args.get(1).as_tagged().dominant_tag() ? args.get(1).as_tagged().dominant_tag() : own);
      pos = hit + from.size();
      ++done;
    }
    out.append(t.slice(pos, s.size()));
    return Value::string(std::move(out));
  }
  if (name == "upper") return Value::string(python_upper(s), own);
  if (name == "lower" || name == "casefold") return Value::string(python_lower(s), own);
  if (name == "title") return Value::string(python_title(s), own);
  if (name == "capitalize") return Value::string(python_capitalize(s), own);
  if (name == "swapcase") {
    std::string out = s;
    for (auto& c : out) c = std::isupper(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : static_cast<char>(std::toupper(c));
    return Value::string(out, own);
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    BoundArgs args(a, name, {"sub", "start", "end"});
    const std::string& sub = require_string(args.get(0), name + " argument");
    if (args.has(1) || args.has(2)) fail("TypeError", name + "() start/end arguments are not supported");
    if (name == "count") {
      if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8_length(s) + 1));
      int64_t n = 0;
      for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return Value::integer(n);
    }
    size_t p = (name == "find" || name == "index") ? s.find(sub) : s.rfind(sub);
    if (p == std::string::npos) {
      if (name == "index" || name == "rindex") fail("ValueError", "substring not found");
      return Value::integer(-1);
    }
    return Value::integer(static_cast<int64_t>(utf8_length(std::string_view(s).substr(0, p))));
  }
  if (name == "join") {
    BoundArgs args(a, name, {"iterable"});
    TaggedText out;
    bool first = true;
    for (const auto& item : args.get(0).iterate()) {
      if (!first) out.append(t);
      first = false;
      if (!item.is_string()) fail("TypeError", "sequence item: expected str instance, " + item.type_name() + " found");
      out.append(item.as_tagged());
    }
    return Value::string(std::move(out));
  }
  if (name == "format") return format_string(self, a);
  auto all_chars = [&](auto pred) {
    if (s.empty()) return Value::boolean(false);
    for (unsigned char c : s)
      if (!pred(c)) return Value::boolean(false);
    return Value::boolean(true);
  };
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal") return all_chars([](unsigned char c) { return std::isdigit(c) != 0; });
  if (name == "isalpha") return all_chars([](unsigned char c) { return std::isalpha(c) != 0 || c >= 0x80; });
  if (name == "isalnum") return all_chars([](unsigned char c) { return std::isalnum(c) != 0 || c >= 0x80; });
  if (name == "isspace") return all_chars([](unsigned char c) { return is_python_space(c); });
  if (name == "isupper" || name == "islower") {
    bool cased = false;
    for (unsigned char c : s) {
      if (std::isupper(c) || std::islower(c)) cased = true;
      if (name == "isupper" ? std::islower(c) : std::isupper(c)) return Value::boolean(false);
    }
    return Value::boolean(cased);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    BoundArgs args(a, name, {"affix"});
    const std::string& x = require_string(args.get(0), name + " argument");
    if (name == "removeprefix" && s.compare(0, x.size(), x) == 0) return Value::string(t.slice(x.size(), s.size()));
    if (name == "removesuffix" && x.size() <= s.size() && s.compare(s.size() - x.size(), x.size(), x) == 0)
      return Value::string(t.slice(0, s.size() - x.size()));
    return self;
  }
  if (name == "zfill" || name == "center" || name == "ljust" || name == "rjust") {
    BoundArgs args(a, name, {"width", "fillchar"});
    int64_t width = args.get(0).as_int();
    std::string fill = name == "zfill" ? "0" : args.has(1) ? require_string(args.get(1), "fillchar") : " ";
    int64_t len = static_cast<int64_t>(utf8_length(s));
    if (width <= len) return self;
    if (width > (1 << 20)) fail("SecurityError", name + "() width is too large");
    size_t pad = static_cast<size_t>(width - len);
    size_t left = name == "rjust" || name == "zfill" ? pad : name == "ljust" ? 0 : pad / 2 + (pad & static_cast<size_t>(width) & 1);
    TaggedText out;
    for (size_t i = 0; i < left; ++i) out.append(fill);
    out.append(t);
    for (size_t i = left; i < pad; ++i) out.append(fill);
    return Value::string(std::move(out));
  }
  if (name == "partition" || name == "rpartition") {
    BoundArgs args(a, name, {"sep"});
    const std::string& sep = require_string(args.get(0), "separator");
    size_t p = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (p == std::string::npos) {
      if (name == "partition") return Value::list({self, Value::string(""), Value::string("")}, kNoTag, true);
      return Value::list({Value::string(""), Value::string(""), self}, kNoTag, true);
    }
    return Value::list({Value::string(t.slice(0, p)), Value::string(t.slice(p, p + sep.size())),
                        Value::string(t.slice(p + sep.size(), s.size()))},
                       kNoTag, true);
  }
  fail("TypeError", "str." + name + "() is not supported");
}

Value dict_method(const Value& self, const std::string& name, const CallArgs& a) {
  const DictData& d = self.as_dict();
  if (name == "get") {
    BoundArgs args(a, name, {"key", "default"});
    const Value& key = args.get(0);
    if (!key.is_undefined() && !key.is_list() && !key.is_dict())
      if (const Value* v = d.find(key)) return *v;
    return args.get_or(1, Value::none());
  }
  if (name == "items") {
    BoundArgs args(a, name, {});
    std::vector<Value> items;
    for (size_t i = 0; i < d.size(); ++i) items.push_back(Value::list({d.key_at(i, self.tag()), d.items()[i].second}, self.tag(), true));
    return Value::list(std::move(items), self.tag());
  }
  if (name == "keys") {
    BoundArgs args(a, name, {});
    return Value::list(self.iterate(), self.tag());
  }
  if (name == "values") {
    BoundArgs args(a, name, {});
    std::vector<Value> items;
    for (const auto& kv : d.items()) items.push_back(kv.second);
    return Value::list(std::move(items), self.tag());
  }
  if (name == "copy") return self;
  unsafe(self, name);
}

Value list_method(const Value& self, const std::string& name, const CallArgs& a) {
  if (name == "index" || name == "count") {
    BoundArgs args(a, name, {"value"});
    int64_t n = 0;
    const auto& items = self.as_list();
    for (size_t i = 0; i < items.size(); ++i) {
      if (!values_equal(items[i], args.get(0))) continue;
      if (name == "index") return Value::integer(static_cast<int64_t>(i));
      ++n;
    }
    if (name == "index") fail("ValueError", args.get(0).repr().text() + " is not in list");
    return Value::integer(n);
  }
  if (name == "copy") return Value::list(self.as_list(), self.tag(), self.is_tuple());
  unsafe(self, name);
}

}  // namespace

bool has_method(const Value& self, const std::string& name) {
  if (self.is_string()) return string_methods().count(name) != 0;
  if (self.is_dict()) return !self.is_namespace() && dict_methods().count(name) != 0;
  if (self.is_list()) return list_methods().count(name) != 0;
  return false;
}

Value call_method(const Value& self, const std::string& name, const CallArgs& args, bool& found) {
  found = has_method(self, name);
  if (!found) return Value();
  if (self.is_string()) {
    if (name == "encode") fail("TypeError", "str.encode() is not supported");
    return string_method(self, name, args);
  }
  if (self.is_dict()) return dict_method(self, name, args);
  return list_method(self, name, args);
}

}  // namespace keel::jinja
