// Python operators and member access as jinja2 applies them: arithmetic with Python's types and
// errors, slicing by code point, `.name` (methods first) and `[key]` (keys first), and `in`.
#include "keel/chat/jinja_operators.h"

#include <algorithm>
#include <cmath>

#include "keel/chat/jinja_builtins.h"
#include "keel/chat/jinja_error.h"

namespace keel::jinja {

[[noreturn]] void raise_undefined(const Value& v) {
  const std::string& hint = v.undefined_hint();
  fail("UndefinedError", hint.empty() ? "value is undefined" : hint);
}

namespace {

std::string object_name(const Value& v) {
  if (v.is_none()) return "'None'";
  std::string name = "'";
  name += v.type_name();
  name += " object'";
  return name;
}

Value missing_member(const Value& obj, const std::string& name) {
  return Value::undefined(object_name(obj) + " has no attribute '" + name + "'");
}

// Python's index rules for s[i]: negative counts from the end.
bool normalize_index(int64_t& i, size_t size) {
  if (i < 0) i += static_cast<int64_t>(size);
  return i >= 0 && static_cast<size_t>(i) < size;
}


// Python slice semantics: indices of the selected elements for a sequence of `size`.
std::vector<size_t> slice_indices(size_t size, const Value& start_v, const Value& stop_v, const Value& step_v) {
  int64_t n = static_cast<int64_t>(size);
  int64_t step = step_v.is_none() || step_v.is_undefined() ? 1 : require_int(step_v, "slice step");
  if (step == 0) fail("ValueError", "slice step cannot be zero");
  auto clamp = [&](const Value& v, int64_t fallback, bool is_start) {
    if (v.is_none() || v.is_undefined()) return fallback;
    int64_t i = require_int(v, "slice index");
    if (i < 0) i += n;
    if (step > 0) return std::clamp<int64_t>(i, 0, n);
    (void)is_start;
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  std::vector<size_t> out;
  if (step > 0) {
    int64_t b = clamp(start_v, 0, true), e = clamp(stop_v, n, false);
    for (int64_t i = b; i < e; i += step) out.push_back(static_cast<size_t>(i));
  } else {
    int64_t b = clamp(start_v, n - 1, true), e = clamp(stop_v, -1, false);
    for (int64_t i = b; i > e; i += step) out.push_back(static_cast<size_t>(i));
  }
  return out;
}

Value numeric_result(double d, bool as_float, Tag tag) {
  if (as_float) return Value::number(d, tag);
  return Value::integer(static_cast<int64_t>(d), tag);
}

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  fail("TypeError", "unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

}  // namespace

Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) raise_undefined(obj);
  if (obj.is_list()) {
    std::vector<Value> items;
    const auto& src = obj.as_list();
    for (size_t i : slice_indices(src.size(), start, stop, step)) items.push_back(src[i]);
    return Value::list(std::move(items), obj.tag(), obj.is_tuple());
  }
  if (obj.is_string()) {
    const TaggedText& t = obj.as_tagged();
    const std::string& s = t.text();
    // Byte offsets of every code point, so slicing counts characters like Python.
    std::vector<size_t> starts;
    for (size_t i = 0; i < s.size(); ++i)
      if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) starts.push_back(i);
    starts.push_back(s.size());
    auto idx = slice_indices(starts.size() - 1, start, stop, step);
    bool contiguous = true;
    for (size_t k = 1; k < idx.size(); ++k)
      if (idx[k] != idx[k - 1] + 1) contiguous = false;
    if (contiguous) {
      if (idx.empty()) return Value::string("");
      return Value::string(t.slice(starts[idx.front()], starts[idx.back() + 1]));
    }
    TaggedText out;
    for (size_t i : idx) out.append(t.slice(starts[i], starts[i + 1]));
    return Value::string(std::move(out));
  }
  fail("TypeError", "'" + obj.type_name() + "' object is not subscriptable");
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      if (a.is_markup() || b.is_markup()) {
        // Markup + str escapes the plain side, as markupsafe does.
        TaggedText t = a.is_markup() ? a.as_tagged() : TaggedText(html_escape(a.as_string()), a.as_tagged().dominant_tag());
        t.append(b.is_markup() ? b.as_tagged() : TaggedText(html_escape(b.as_string()), b.as_tagged().dominant_tag()));
        return Value::markup(std::move(t));
      }
      TaggedText t = a.as_tagged();
      t.append(b.as_tagged());
      return Value::string(std::move(t));
    }
    if (a.is_string()) fail("TypeError", "can only concatenate str (not \"" + b.type_name() + "\") to str");
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      std::vector<Value> items = a.as_list();
      items.insert(items.end(), b.as_list().begin(), b.as_list().end());
      return Value::list(std::move(items), a.tag(), a.is_tuple());
    }
    if (a.is_list())
      fail("TypeError", "can only concatenate " + a.type_name() + " (not \"" + b.type_name() + "\") to " + a.type_name());
  }
  if (op == "*") {
    const Value* seq = a.is_string() || a.is_list() ? &a : b.is_string() || b.is_list() ? &b : nullptr;
    const Value* count = seq == &a ? &b : &a;
    if (seq && (count->is_int() || count->is_bool())) {
      int64_t n = std::max<int64_t>(0, count->as_int());
      size_t unit = seq->is_string() ? seq->as_string().size() : seq->as_list().size();
      size_t limit = seq->is_string() ? (64u << 20) : (1u << 20);  // bytes / list items
      if (unit != 0 && static_cast<size_t>(n) > limit / unit) fail("SecurityError", "repetition result is too large");
      if (seq->is_string()) {
        TaggedText t;
        for (int64_t i = 0; i < n; ++i) t.append(seq->as_tagged());
        return Value::string(std::move(t));
      }
      std::vector<Value> items;
      for (int64_t i = 0; i < n; ++i) items.insert(items.end(), seq->as_list().begin(), seq->as_list().end());
      return Value::list(std::move(items), seq->tag(), seq->is_tuple());
    }
  }
  if (op == "%" && a.is_string()) {
    // printf-style formatting: only %s, %d, %r and %% are meaningful in chat templates.
    std::vector<Value> params = b.is_list() && b.is_tuple() ? b.as_list() : std::vector<Value>{b};
    TaggedText out;
    const std::string& f = a.as_string();
    size_t next = 0;
    for (size_t i = 0; i < f.size(); ++i) {
      if (f[i] != '%' || i + 1 >= f.size()) {
        out.append(std::string_view(&f[i], 1), a.as_tagged().dominant_tag());
        continue;
      }
      char c = f[++i];
      if (c == '%') {
        out.append("%");
        continue;
      }
      if (next >= params.size()) fail("TypeError", "not enough arguments for format string");
      const Value& p = params[next++];
      if (c == 's') out.append(p.to_text());
      else if (c == 'r') out.append(p.repr());
      else if (c == 'd' || c == 'i') out.append(std::to_string(p.is_float() ? static_cast<int64_t>(p.as_double()) : require_int(p, "%d format")), p.tag());
      else fail("ValueError", std::string("unsupported format character '") + c + "'");
    }
    if (next < params.size()) fail("TypeError", "not all arguments converted during string formatting");
    return Value::string(std::move(out));
  }
  if (!a.is_number() || !b.is_number()) unsupported(op, a, b);
  bool any_float = a.is_float() || b.is_float();
  Tag tag = a.tag() ? a.tag() : b.tag();
  if (op == "/") {
    if (b.as_double() == 0) fail("ZeroDivisionError", "division by zero");
    return Value::number(a.as_double() / b.as_double(), tag);
  }
  if (!any_float) {
    int64_t x = a.as_int(), y = b.as_int(), r = 0;
    if (op == "+") {
      if (__builtin_add_overflow(x, y, &r)) fail("OverflowError", "integer overflow");
    } else if (op == "-") {
      if (__builtin_sub_overflow(x, y, &r)) fail("OverflowError", "integer overflow");
    } else if (op == "*") {
      if (__builtin_mul_overflow(x, y, &r)) fail("OverflowError", "integer overflow");
    } else if (op == "//" || op == "%") {
      if (y == 0) fail("ZeroDivisionError", "integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) fail("OverflowError", "integer overflow");
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;  // Python floors
      r = op == "//" ? q : m;
    } else if (op == "**") {
      if (y < 0) return Value::number(std::pow(static_cast<double>(x), static_cast<double>(y)), tag);
      r = 1;
      for (int64_t i = 0; i < y; ++i)
        if (__builtin_mul_overflow(r, x, &r)) fail("OverflowError", "integer overflow");
    } else {
      unsupported(op, a, b);
    }
    return Value::integer(r, tag);
  }
  double x = a.as_double(), y = b.as_double();
  if (op == "+") return Value::number(x + y, tag);
  if (op == "-") return Value::number(x - y, tag);
  if (op == "*") return Value::number(x * y, tag);
  if (op == "**") return Value::number(std::pow(x, y), tag);
  if (y == 0) fail("ZeroDivisionError", "float division by zero");
  if (op == "//") return numeric_result(std::floor(x / y), true, tag);
  if (op == "%") {
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return Value::number(m, tag);
  }
  unsupported(op, a, b);
}



int64_t require_int(const Value& v, const char* what) {
  if (v.is_int() || v.is_bool()) return v.as_int();
  if (v.is_undefined()) raise_undefined(v);
  fail("TypeError", std::string(what) + " must be an integer, not " + v.type_name());
}

Value get_attribute(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) raise_undefined(obj);
  if (obj.is_dict()) {
    if (!obj.is_namespace() && has_method(obj, name)) {
      return Value::callable(name, [obj, name](CallArgs& args) {
        bool found = false;
        return call_method(obj, name, args, found);
      });
    }
    if (const Value* v = obj.as_dict().find(name)) return *v;
    return missing_member(obj, name);
  }
  if ((obj.is_string() || obj.is_list()) && has_method(obj, name)) {
    return Value::callable(name, [obj, name](CallArgs& args) {
      bool found = false;
      return call_method(obj, name, args, found);
    });
  }
  return missing_member(obj, name);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) raise_undefined(obj);
  if (obj.is_dict() && !key.is_undefined() && !key.is_list() && !key.is_dict()) {
    if (const Value* v = obj.as_dict().find(key)) return *v;
    if (key.is_string()) return get_attribute(obj, key.as_string());
    return Value::undefined(object_name(obj) + " has no element " + key.repr().text());
  }
  if (key.is_undefined()) return Value::undefined(object_name(obj) + " has no element Undefined");
  if (obj.is_generator()) fail("TypeError", "'generator' object is not subscriptable");
  if (obj.is_list() && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (!normalize_index(i, obj.as_list().size())) return Value::undefined(object_name(obj) + " has no element " + std::to_string(key.as_int()));
    return obj.as_list()[static_cast<size_t>(i)];
  }
  if (obj.is_string() && (key.is_int() || key.is_bool())) {
    const std::string& s = obj.as_string();
    int64_t i = key.as_int();
    if (!normalize_index(i, utf8_length(s))) return Value::undefined(object_name(obj) + " has no element " + std::to_string(key.as_int()));
    size_t b = utf8_offset(s, static_cast<size_t>(i)), e = utf8_offset(s, static_cast<size_t>(i) + 1);
    return Value::string(obj.as_tagged().slice(b, e));
  }
  if (key.is_string()) return get_attribute(obj, key.as_string());
  return Value::undefined(object_name(obj) + " has no element " + key.repr().text());
}

bool value_contains(const Value& container, const Value& item) {
  if (container.is_undefined()) return false;
  if (container.is_string()) {
    if (item.is_undefined()) raise_undefined(item);
    if (!item.is_string()) fail("TypeError", "'in <string>' requires string as left operand, not " + item.type_name());
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_list()) {
    for (const auto& v : container.as_list())
      if (values_equal(v, item)) return true;
    return false;
  }
  if (container.is_dict()) {
    if (item.is_list() || item.is_dict()) fail("TypeError", "unhashable type: '" + item.type_name() + "'");
    return !item.is_undefined() && container.as_dict().find(item) != nullptr;
  }
  fail("TypeError", "argument of type '" + container.type_name() + "' is not iterable");
}

}  // namespace keel::jinja
