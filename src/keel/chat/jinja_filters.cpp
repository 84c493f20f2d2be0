// jinja2's builtin filters as chat templates use them, plus transformers' tojson. Filters that
// only cut a string (trim, indent, join) keep byte-level provenance; filters that rewrite it
// (upper, replace...) give the result the provenance that dominated the input.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "keel/chat/jinja_args.h"
#include "keel/chat/jinja_builtins.h"
#include "keel/chat/jinja_evaluator.h"
#include "keel/chat/jinja_operators.h"
#include "keel/chat/jinja_template.h"

namespace keel::jinja {
namespace {

using FilterFn = std::function<Value(Evaluator&, const Value&, const CallArgs&)>;

Value text_of(const Value& v) { return Value::string(v.to_text()); }

// Attribute lookup for map/selectattr/sort/...: "a.b" walks nested members, "0" indexes.
Value attribute_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    cur = numeric ? get_item(cur, Value::integer(std::stoll(part))) : get_item(cur, Value::string(part));
    if (dot == std::string::npos) return cur;
    if (cur.is_undefined()) return cur;
    start = dot + 1;
  }
}

// The sort key jinja2 uses: strings compare case-insensitively unless asked otherwise.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(python_lower(v.as_string()));
  return v;
}

CallArgs rest_args(const CallArgs& a, size_t skip) {
  CallArgs r;
  for (size_t i = skip; i < a.positional.size(); ++i) r.positional.push_back(a.positional[i]);
  r.named = a.named;
  return r;
}

Value select_items(Evaluator& ev, const Value& input, const CallArgs& a, bool by_attribute, bool keep_matches) {
  std::string attr;
  size_t next = 0;
  if (by_attribute) {
    if (a.positional.empty() || !a.positional[0].is_string()) fail("TypeError", "selectattr needs an attribute name");
    attr = a.positional[0].as_string();
    next = 1;
  }
  std::string test;
  if (a.positional.size() > next) {
    if (!a.positional[next].is_string()) fail("TypeError", "test name must be a string");
    test = a.positional[next].as_string();
  }
  CallArgs test_args = rest_args(a, next + 1);
  std::vector<Value> out;
  if (!input.truthy()) return Value::generator({}, input.tag());  // jinja2 checks `if value:` first
  for (const auto& item : input.iterate()) {
    Value subject = by_attribute ? attribute_path(item, attr) : item;
    bool ok = test.empty() ? subject.truthy() : apply_test(ev, test, subject, test_args);
    if (ok == keep_matches) out.push_back(item);
  }
  return Value::generator(std::move(out), input.tag());
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

// jinja2's indent: the first line is left alone unless `first`, blank lines stay blank unless `blank`.
Value indent_text(const Value& input, const CallArgs& a) {
  BoundArgs args(a, "indent", {"width", "first", "blank"});
  Value width = args.get_or(0, Value::integer(4));
  std::string pad = width.is_string() ? width.as_string() : std::string(static_cast<size_t>(std::clamp<int64_t>(width.as_int(), 0, 4096)), ' ');
  bool first = args.get(1).truthy(), blank = args.get(2).truthy();
  TaggedText src = input.to_text();
  std::vector<TaggedText> lines;
  const std::string& s = src.text();
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n' || s[i] == '\r') {
      lines.push_back(src.slice(start, i));
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      start = i + 1;
    }
  }
  lines.push_back(src.slice(start, s.size()));  // jinja2 appends "\n" before splitlines; same effect
  TaggedText out;
  if (first) out.append(pad);
  out.append(lines[0]);
  for (size_t i = 1; i < lines.size(); ++i) {
    out.append("\n");
    if (blank || !lines[i].empty()) out.append(pad);
    out.append(lines[i]);
  }
  return Value::string(std::move(out));
}

Value to_int(const Value& v, const Value& fallback, int base) {
  if (v.is_int()) return v;
  if (v.is_bool()) return Value::integer(v.as_int(), v.tag());
  if (v.is_float()) return Value::integer(static_cast<int64_t>(std::trunc(v.as_double())), v.tag());
  if (v.is_string()) {
    auto [b, e] = python_strip_range(v.as_string(), nullptr, true, true);
    std::string s = v.as_string().substr(b, e - b);
    std::erase(s, '_');
    try {
      size_t used = 0;
      long long x = std::stoll(s, &used, base);
      if (used == s.size()) return Value::integer(x, v.as_tagged().dominant_tag());
    } catch (...) {
    }
    try {
      size_t used = 0;
      double d = std::stod(s, &used);
      if (used == s.size() && std::isfinite(d)) return Value::integer(static_cast<int64_t>(d), v.as_tagged().dominant_tag());
    } catch (...) {
    }
  }
  return fallback;
}

const std::map<std::string, FilterFn>& filters() {
  static const std::map<std::string, FilterFn> table = [] {
    std::map<std::string, FilterFn> f;
    f["length"] = f["count"] = [](Evaluator&, const Value& v, const CallArgs& a) {
      BoundArgs args(a, "length", {});
      return Value::integer(static_cast<int64_t>(v.length()));
    };
    f["tojson"] = [](Evaluator&, const Value& v, const CallArgs& a) {
      BoundArgs args(a, "tojson", {"indent", "ensure_ascii", "separators", "sort_keys"});
      JsonStyle style;
      if (args.has(0) && !args.get(0).is_none()) {
        style.indent = static_cast<int>(std::clamp<int64_t>(args.get(0).as_int(), 0, 64));
        style.item_separator = ",";
      }
      style.ensure_ascii = args.get(1).truthy();
      if (args.has(2) && !args.get(2).is_none()) {
        const Value& sep = args.get(2);
        if (!sep.is_list() || sep.as_list().size() != 2 || !sep.as_list()[0].is_string() || !sep.as_list()[1].is_string())
          fail("TypeError", "tojson separators must be a pair of strings");
        style.item_separator = sep.as_list()[0].as_string();
        style.key_separator = sep.as_list()[1].as_string();
      }
      style.sort_keys = args.get(3).truthy();
      return Value::string(to_json(v, style));
    };
    f["trim"] = [](Evaluator&, const Value& v, const CallArgs& a) {
      BoundArgs args(a, "trim", {"chars"});
      TaggedText t = v.to_text();
      const std::string* chars = args.get(0).is_string() ? &args.get(0).as_string() : nullptr;
      auto [b, e] = python_strip_range(t.text(), chars, true, true);
      return Value::string(t.slice(b, e));
    };
    f["string"] = [](Evaluator&, const Value& v, const CallArgs&) { return v.is_string() ? v : text_of(v); };
    f["safe"] = [](Evaluator&, const Value& v, const CallArgs&) { return Value::markup(v.to_text()); };
    f["default"] = f["d"] = [](Evaluator&, const Value& v, const CallArgs& a) {
      BoundArgs args(a, "default", {"default_value", "boolean"});
      bool use_default = v.is_undefined() || (args.get(1).truthy() && !v.truthy());
      return use_default ? args.get_or(0, Value::string("")) : v;
    };
    f["join"] = [](Evaluator&, const Value& v, const CallArgs& a) {
      BoundArgs args(a, "join", {"d", "attribute"});
      TaggedText sep = args.has(0) ? args.get(0).to_text() : TaggedText();
      TaggedText out;
      bool first = true;
      for (const auto& item : v.iterate()) {
        if (!first) out.append(sep);
        first = false;
        Value x = args.has(1) ? attribute_path(item, args.get(1).to_text().text()) : item;
        out.append(x.to_text());
      }
      return Value::string(std::move(out));
    };
    f["items"] = [](Evaluator&, const Value& v, const CallArgs&) {
      if (v.is_undefined()) return Value::list({});
      if (!v.is_dict()) fail("TypeError", "items filter expects a mapping, got " + v.type_name());
      bool found = false;
      return call_method(v, "items", {}, found);
    };
    f["upper"] = [](Evaluator&, const Value& v, const CallArgs&) {
      TaggedText t = v.to_text();
      return Value::string(python_upper(t.text()), t.dominant_tag());
    };
    f["lower"] = [](Evaluator&, const Value& v, const CallArgs&) {
      TaggedText t = v.to_text();
      return Value::string(python_lower(t.text()), t.dominant_tag());
    };
    f["capitalize"] = [](Evaluator&, const Value& v, const CallArgs&) {
      TaggedText t = v.to_text();
      return Value::string(python_capitalize(t.text()), t.dominant_tag());
    };
    f["title"] = [](Evaluator&, const Value& v, const CallArgs&) {
      TaggedText t = v.to_text();
      return Value::string(python_title(t.text()), t.dominant_tag());
    };
    f["replace"] = [](Evaluator&, const Value& v, const CallArgs& a) {
      bool found = false;
      return call_method(text_of(v), "replace", a, found);
    };
    f["escape"] = f["e"] = [](Evaluator&, const Value& v, const CallArgs&) {
      if (v.is_markup()) return v;
      TaggedText t = v.to_text();
      return Value::markup(TaggedText(html_escape(t.text()), t.dominant_tag()));
    };
    f["from_json"] = [](Evaluator&, const Value& v, const CallArgs&) {
      if (!v.is_string()) fail("TypeError", "from_json expects a string, got " + v.type_name());
      auto j = nlohmann::ordered_json::parse(v.as_string(), nullptr, false);
      if (j.is_discarded()) fail("ValueError", "from_json: the string is not valid JSON");
      return value_from_json(j, v.as_tagged().dominant_tag());
    };
    f["indent"] = [](Evaluator&, const Value& v, const CallArgs& a) { return indent_text(v, a); };
    f["list"] = [](Evaluator&, const Value& v, const CallArgs&) { return Value::list(v.iterate(), v.tag()); };
    f["first"] = [](Evaluator&, const Value& v, const CallArgs&) {
      auto items = v.iterate();
      return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
    };
    f["last"] = [](Evaluator&, const Value& v, const CallArgs&) {
      auto items = v.iterate();
      return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
    };
    f["reverse"] = [](Evaluator&, const Value& v, const CallArgs&) {
      if (v.is_string()) {
        auto chars = v.iterate();
        TaggedText out;
        for (auto it = chars.rbegin(); it != chars.rend(); ++it) out.append(it->as_tagged());
        return Value::string(std::move(out));
      }
      auto items = v.iterate();
      std::reverse(items.begin(), items.end());
      return Value::list(std::move(items), v.tag());
    };
    f["selectattr"] = [](Evaluator& ev, const Value& v, const CallArgs& a) { return select_items(ev, v, a, true, true); };
    f["rejectattr"] = [](Evaluator& ev, const Value& v, const CallArgs& a) { return select_items(ev, v, a, true, false); };
    f["select"] = [](Evaluator& ev, const Value& v, const CallArgs& a) { return select_items(ev, v, a, false, true); };
    f["reject"] = [](Evaluator& ev, const Value& v, const CallArgs& a) { return select_items(ev, v, a, false, false); };
    f["map"] = [](Evaluator& ev, const Value& v, const CallArgs& a) {
      std::vector<Value> out;
      if (!v.truthy()) return Value::generator({}, v.tag());
      const Value* attribute = nullptr;
      const Value* fallback = nullptr;
      for (const auto& [k, x] : a.named) {
        if (k == "attribute") attribute = &x;
        else if (k == "default") fallback = &x;
      }
      if (attribute) {
        for (const auto& item : v.iterate()) {
          Value r = attribute_path(item, attribute->to_text().text());
          out.push_back(r.is_undefined() && fallback ? *fallback : r);
        }
      } else {
        if (a.positional.empty() || !a.positional[0].is_string()) fail("TypeError", "map needs a filter name or attribute=");
        CallArgs filter_args = rest_args(a, 1);
        for (const auto& item : v.iterate()) out.push_back(apply_filter(ev, a.positional[0].as_string(), item, filter_args));
      }
      return Value::generator(std::move(out), v.tag());
    };
    f["attr"] = [](Evaluator&, const Value& v, const CallArgs& a) {
      BoundArgs args(a, "attr", {"name"});
      return get_attribute(v, args.get(0).to_text().text());
    };
    f["dictsort"] = [](Evaluator&, const Value& v, const CallArgs& a) {
      BoundArgs args(a, "dictsort", {"case_sensitive", "by", "reverse"});
      if (!v.is_dict()) fail("TypeError", "dictsort expects a mapping");
      bool case_sensitive = args.get(0).truthy();
      bool by_value = args.has(1) && args.get(1).is_string() && args.get(1).as_string() == "value";
      bool found = false;
      std::vector<Value> items = call_method(v, "items", {}, found).as_list();
      std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
        size_t k = by_value ? 1 : 0;
        return values_less(sort_key(x.as_list()[k], case_sensitive), sort_key(y.as_list()[k], case_sensitive));
      });
      if (args.get(2).truthy()) std::reverse(items.begin(), items.end());
      return Value::list(std::move(items), v.tag());
    };
    f["sort"] = [](Evaluator&, const Value& v, const CallArgs& a) {
      BoundArgs args(a, "sort", {"reverse", "case_sensitive", "attribute"});
      bool reverse = args.get(0).truthy(), case_sensitive = args.get(1).truthy();
      std::vector<Value> items = v.iterate();
      auto key = [&](const Value& x) {
        Value k = args.has(2) ? attribute_path(x, args.get(2).to_text().text()) : x;
        return sort_key(k, case_sensitive);
      };
      std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
        return reverse ? values_less(key(y), key(x)) : values_less(key(x), key(y));
      });
      return Value::list(std::move(items), v.tag());
    };
    f["unique"] = [](Evaluator&, const Value& v, const CallArgs& a) {
      BoundArgs args(a, "unique", {"case_sensitive", "attribute"});
      std::vector<Value> out, seen;
      for (const auto& item : v.iterate()) {
        Value k = args.has(1) ? attribute_path(item, args.get(1).to_text().text()) : item;
        k = sort_key(k, args.get(0).truthy());
        bool dup = false;
        for (const auto& s : seen) dup |= values_equal(s, k);
        if (dup) continue;
        seen.push_back(k);
        out.push_back(item);
      }
      return Value::list(std::move(out), v.tag());
    };
    f["int"] = [](Evaluator&, const Value& v, const CallArgs& a) {
      BoundArgs args(a, "int", {"default", "base"});
      return to_int(v, args.get_or(0, Value::integer(0)), static_cast<int>(args.get_or(1, Value::integer(10)).as_int()));
    };
    f["float"] = [](Evaluator&, const Value& v, const CallArgs& a) {
      BoundArgs args(a, "float", {"default"});
      if (v.is_float()) return v;
      if (v.is_int() || v.is_bool()) return Value::number(v.as_double(), v.tag());
      if (v.is_string()) {
        try {
          size_t used = 0;
          double d = std::stod(v.as_string(), &used);
          if (used == v.as_string().size()) return Value::number(d, v.as_tagged().dominant_tag());
        } catch (...) {
        }
      }
      return args.get_or(0, Value::number(0.0));
    };
    f["abs"] = [](Evaluator&, const Value& v, const CallArgs&) {
      if (v.is_float()) return Value::number(std::fabs(v.as_double()), v.tag());
      if (v.is_int() || v.is_bool()) return Value::integer(std::llabs(v.as_int()), v.tag());
      fail("TypeError", "bad operand type for abs(): '" + v.type_name() + "'");
    };
    f["round"] = [](Evaluator&, const Value& v, const CallArgs& a) {
      BoundArgs args(a, "round", {"precision", "method"});
      if (!v.is_number()) fail("TypeError", "round expects a number");
      double scale = std::pow(10.0, static_cast<double>(args.get_or(0, Value::integer(0)).as_int()));
      std::string method = args.has(1) ? args.get(1).to_text().text() : "common";
      double x = v.as_double() * scale;
      x = method == "floor" ? std::floor(x) : method == "ceil" ? std::ceil(x) : std::round(x);
      return Value::number(x / scale, v.tag());
    };
    f["sum"] = [](Evaluator&, const Value& v, const CallArgs& a) {
      BoundArgs args(a, "sum", {"attribute", "start"});
      Value total = args.get_or(1, Value::integer(0));
      for (const auto& item : v.iterate()) {
        Value x = args.has(0) ? attribute_path(item, args.get(0).to_text().text()) : item;
        if (!x.is_number() || !total.is_number()) fail("TypeError", "sum of non-numbers");
        total = (x.is_float() || total.is_float()) ? Value::number(total.as_double() + x.as_double())
                                                   : Value::integer(total.as_int() + x.as_int());
      }
      return total;
    };
    auto extreme = [](bool want_max) {
      return [want_max](Evaluator&, const Value& v, const CallArgs& a) {
        BoundArgs args(a, want_max ? "max" : "min", {"case_sensitive", "attribute"});
        auto items = v.iterate();
        if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
        auto key = [&](const Value& x) {
          Value k = args.has(1) ? attribute_path(x, args.get(1).to_text().text()) : x;
          return sort_key(k, args.get(0).truthy());
        };
        Value best = items[0];
        for (const auto& x : items)
          if (want_max ? values_less(key(best), key(x)) : values_less(key(x), key(best))) best = x;
        return best;
      };
    };
    f["max"] = extreme(true);
    f["min"] = extreme(false);
    f["wordcount"] = [](Evaluator&, const Value& v, const CallArgs&) {
      bool found = false;
      return Value::integer(static_cast<int64_t>(call_method(text_of(v), "split", {}, found).as_list().size()));
    };
    f["center"] = [](Evaluator&, const Value& v, const CallArgs& a) {
      bool found = false;
      return call_method(text_of(v), "center", a, found);
    };
    f["format"] = [](Evaluator&, const Value& v, const CallArgs& a) {
      // "%s - %s" | format(a, b) is Python's printf-style formatting.
      TaggedText out;
      const std::string fmt = v.to_text().text();
      size_t next = 0;
      for (size_t i = 0; i < fmt.size(); ++i) {
        if (fmt[i] != '%' || i + 1 >= fmt.size()) {
          out.append(std::string(1, fmt[i]));
          continue;
        }
        char c = fmt[++i];
        if (c == '%') {
          out.append("%");
          continue;
        }
        if (next >= a.positional.size()) fail("TypeError", "not enough arguments for format string");
        const Value& p = a.positional[next++];
        out.append(c == 'r' ? p.repr() : p.to_text());
      }
      return Value::string(std::move(out));
    };
    f["batch"] = [](Evaluator&, const Value& v, const CallArgs& a) {
      BoundArgs args(a, "batch", {"linecount", "fill_with"});
      int64_t n = args.get(0).as_int();
      if (n <= 0) fail("ValueError", "batch size must be positive");
      std::vector<Value> out, cur;
      for (const auto& item : v.iterate()) {
        cur.push_back(item);
        if (static_cast<int64_t>(cur.size()) == n) out.push_back(Value::list(std::move(cur))), cur.clear();
      }
      if (!cur.empty()) {
        if (args.has(1))
          while (static_cast<int64_t>(cur.size()) < n) cur.push_back(args.get(1));
        out.push_back(Value::list(std::move(cur)));
      }
      return Value::list(std::move(out));
    };
    f["pprint"] = [](Evaluator&, const Value& v, const CallArgs&) { return Value::string(v.repr()); };
    return f;
  }();
  return table;
}

}  // namespace

bool filter_exists(const std::string& name) { return filters().count(name) != 0; }

Value apply_filter(Evaluator& ev, const std::string& name, const Value& input, const CallArgs& args) {
  auto it = filters().find(name);
  if (it == filters().end()) fail("TemplateAssertionError", "No filter named '" + name + "'.");
  return it->second(ev, input, args);
}

}  // namespace keel::jinja
