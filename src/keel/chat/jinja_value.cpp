#include "keel/chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "keel/chat/jinja_error.h"

namespace keel::jinja {

size_t DictData::size() const { return items_.size(); }

const Value* DictData::find(std::string_view key) const {
  auto it = index_.find(std::string(key));
  if (it == index_.end() || non_string_keys_[it->second]) return nullptr;
  return &items_[it->second].second;
}

void DictData::set(const std::string& key, Value value) { set(Value::string(key), std::move(value)); }

std::string DictData::index_key(const Value& key) {
  if (key.is_string()) return key.as_string();
  // Python: 1 == 1.0 == True hash alike; other kinds never collide with strings.
  std::string tagged = "\x01";
  if (key.is_int() || key.is_bool()) return tagged.append(std::to_string(key.as_int()));
  if (key.is_float() && std::trunc(key.as_double()) == key.as_double() && std::fabs(key.as_double()) < 9e18)
    return tagged.append(std::to_string(static_cast<int64_t>(key.as_double())));
  if (key.is_list() || key.is_dict() || key.is_undefined()) fail("TypeError", "unhashable type: '" + key.type_name() + "'");
  return "\x02" + key.type_name() + ":" + key.repr().text();
}

const Value* DictData::find(const Value& key) const {
  auto it = index_.find(index_key(key));
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

void DictData::set(const Value& key, Value value) {
  if (!value.is_namespace()) {
    int d = value.nesting() + 1;
    if (d > kMaxValueNesting) fail("SecurityError", "values nested more than " + std::to_string(kMaxValueNesting) + " deep");
    depth_ = std::max(depth_, d);
  }
  std::string k = index_key(key);
  auto it = index_.find(k);
  if (it != index_.end()) {
    items_[it->second].second = std::move(value);
    return;
  }
  index_.emplace(k, items_.size());
  items_.emplace_back(key.is_string() ? key.as_string() : key.to_text().text(), std::move(value));
  non_string_keys_.push_back(key.is_string() ? nullptr : std::make_shared<const Value>(key));
}

Value DictData::key_at(size_t i, Tag tag) const {
  if (non_string_keys_[i]) return *non_string_keys_[i];
  return Value::string(items_[i].first, tag);
}

Value Value::undefined(std::string hint) {
  Value v;
  if (!hint.empty()) v.str_ = std::make_shared<const TaggedText>(std::move(hint));
  return v;
}
Value Value::none(Tag tag) {
  Value v;
  v.kind_ = Kind::None;
  v.tag_ = tag;
  return v;
}
Value Value::boolean(bool b, Tag tag) {
  Value v;
  v.kind_ = Kind::Bool;
  v.b_ = b;
  v.tag_ = tag;
  return v;
}
Value Value::integer(int64_t i, Tag tag) {
  Value v;
  v.kind_ = Kind::Int;
  v.i_ = i;
  v.tag_ = tag;
  return v;
}
Value Value::number(double f, Tag tag) {
  Value v;
  v.kind_ = Kind::Float;
  v.f_ = f;
  v.tag_ = tag;
  return v;
}
Value Value::string(std::string s, Tag tag) { return string(TaggedText(std::move(s), tag)); }
Value Value::string(TaggedText t) {
  Value v;
  v.kind_ = Kind::String;
  v.str_ = std::make_shared<const TaggedText>(std::move(t));
  return v;
}
int Value::nesting() const {
  if (kind_ == Kind::List) return list_->depth;
  if (kind_ == Kind::Dict) return is_namespace() ? 1 : dict_->depth();
  return 0;
}

Value Value::list(std::vector<Value> items, Tag tag, bool is_tuple) {
  int depth = 1;
  for (const auto& item : items) depth = std::max(depth, item.nesting() + 1);
  if (depth > kMaxValueNesting) fail("SecurityError", "values nested more than " + std::to_string(kMaxValueNesting) + " deep");
  Value v;
  v.kind_ = Kind::List;
  v.list_ = std::make_shared<ListData>(ListData{std::move(items), is_tuple, false, depth});
  v.tag_ = tag;
  return v;
}
Value Value::generator(std::vector<Value> items, Tag tag) {
  Value v = list(std::move(items), tag);
  v.list_->is_generator = true;
  return v;
}
Value Value::markup(TaggedText t) {
  Value v = string(std::move(t));
  v.markup_ = true;
  return v;
}
Value Value::dict(std::shared_ptr<DictData> d, Tag tag) {
  Value v;
  v.kind_ = Kind::Dict;
  v.dict_ = std::move(d);
  v.tag_ = tag;
  return v;
}
Value Value::callable(std::string name, std::function<Value(CallArgs&)> fn) {
  Value v;
  v.kind_ = Kind::Callable;
  v.fn_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

Value Value::with_tag(Tag t) const {
  Value v = *this;
  if (is_string()) {
    v.str_ = std::make_shared<const TaggedText>(as_string(), t);
  } else {
    v.tag_ = t;
  }
  return v;
}

const std::string& Value::undefined_hint() const {
  static const std::string empty;
  return str_ ? str_->text() : empty;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return b_;
    case Kind::Int:
      return i_ != 0;
    case Kind::Float:
      return f_ != 0.0;
    case Kind::String:
      return !str_->empty();
    case Kind::List:
      return list_->is_generator || !list_->items.empty();
    case Kind::Dict:
      return is_namespace() || dict_->size() != 0;
    case Kind::Callable:
      return true;
  }
  return false;
}

const std::string& Value::type_name() const {
  // Static names, returned by reference: building messages from them never copies a temporary.
  static const std::string kUndefined = "Undefined", kNone = "NoneType", kBool = "bool", kInt = "int",
                           kFloat = "float", kStr = "str", kGenerator = "generator", kTuple = "tuple", kList = "list",
                           kNamespace = "Namespace", kDict = "dict", kFunction = "function";
  switch (kind_) {
    case Kind::Undefined:
      return kUndefined;
    case Kind::None:
      return kNone;
    case Kind::Bool:
      return kBool;
    case Kind::Int:
      return kInt;
    case Kind::Float:
      return kFloat;
    case Kind::String:
      return kStr;
    case Kind::List:
      return list_->is_generator ? kGenerator : list_->is_tuple ? kTuple : kList;
    case Kind::Dict:
      return is_namespace() ? kNamespace : kDict;
    case Kind::Callable:
      return kFunction;
  }
  return kFunction;
}

std::string python_float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  if (f == 0) return std::signbit(f) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // like -1.2345e+05: shortest digits that round-trip
  bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  size_t epos = sci.find('e');
  int exponent = std::stoi(sci.substr(epos + 1));
  std::string digits;
  for (size_t i = 0; i < epos; ++i)
    if (sci[i] != '.') digits += sci[i];
  std::string out;
  if (exponent < -4 || exponent >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out.append(".").append(digits, 1, std::string::npos);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += e;
  } else if (exponent < 0) {
    out = "0.";
    out.append(static_cast<size_t>(-exponent - 1), '0');
    out += digits;
  } else {
    size_t int_digits = static_cast<size_t>(exponent) + 1;
    if (digits.size() <= int_digits) {
      out = digits + std::string(int_digits - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_digits) + "." + digits.substr(int_digits);
    }
  }
  return negative ? "-" + out : out;
}

namespace {

std::string python_string_repr(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == static_cast<unsigned char>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

}  // namespace

TaggedText Value::to_text() const {
  switch (kind_) {
    case Kind::Undefined:
      return {};
    case Kind::String:
      return *str_;
    case Kind::Int:
      return TaggedText(std::to_string(i_), tag_);
    case Kind::Float:
      return TaggedText(python_float_repr(f_), tag_);
    case Kind::Bool:
      return TaggedText(b_ ? "True" : "False", tag_);
    case Kind::None:
      return TaggedText("None", tag_);
    default:
      return repr();
  }
}

TaggedText Value::repr() const {
  switch (kind_) {
    case Kind::String: {
      // A quoted string keeps the provenance of what it quotes.
      return TaggedText(python_string_repr(as_string()), str_->dominant_tag());
    }
    case Kind::List: {
      if (list_->is_generator) return TaggedText("<generator object>", tag_);
      TaggedText out;
      out.append(list_->is_tuple ? "(" : "[", tag_);
      bool first = true;
      for (const auto& item : list_->items) {
        if (!first) out.append(", ", tag_);
        first = false;
        out.append(item.repr());
      }
      if (list_->is_tuple && list_->items.size() == 1) out.append(",", tag_);
      out.append(list_->is_tuple ? ")" : "]", tag_);
      return out;
    }
    case Kind::Dict: {
      if (is_namespace()) return TaggedText("<Namespace>", tag_);
      TaggedText out;
      out.append("{", tag_);
      bool first = true;
      for (size_t i = 0; i < dict_->size(); ++i) {
        if (!first) out.append(", ", tag_);
        first = false;
        out.append(dict_->key_at(i, tag_).repr());
        out.append(": ", tag_);
        out.append(dict_->items()[i].second.repr());
      }
      out.append("}", tag_);
      return out;
    }
    case Kind::Callable:
      return TaggedText("<function " + fn_->name + ">");
    case Kind::Undefined:
      return {};
    default:
      return to_text();
  }
}

std::vector<Value> Value::iterate() const {
  switch (kind_) {
    case Kind::Undefined:
      return {};  // jinja2's default Undefined iterates as empty
    case Kind::List:
      return list_->items;
    case Kind::Dict: {
      std::vector<Value> keys;
      for (size_t i = 0; i < dict_->size(); ++i) keys.push_back(dict_->key_at(i, tag_));
      return keys;
    }
    case Kind::String: {
      // One value per character: refuse sizes that would take gigabytes before any loop bound bites.
      constexpr size_t kMaxIteratedChars = 1u << 22;
      if (as_string().size() > kMaxIteratedChars)
        fail("SecurityError", "a string of more than " + std::to_string(kMaxIteratedChars) + " bytes cannot be iterated");
      std::vector<Value> chars;
      const std::string& s = as_string();
      for (size_t i = 0; i < s.size();) {
        size_t next = utf8_offset(std::string_view(s).substr(i), 1) + i;
        chars.push_back(Value::string(str_->slice(i, next)));
        i = next;
      }
      return chars;
    }
    default:
      fail("TypeError", std::string("'").append(type_name()).append("' object is not iterable"));
  }
}

size_t Value::length() const {
  switch (kind_) {
    case Kind::Undefined:
      return 0;
    case Kind::String:
      return utf8_length(as_string());
    case Kind::List:
      if (list_->is_generator) break;
      return list_->items.size();
    case Kind::Dict:
      return dict_->size();
    default:
      break;
  }
  fail("TypeError", "object of type '" + type_name() + "' has no len()");
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None:
      return true;
    case Value::Kind::String:
      return a.as_string() == b.as_string();
    case Value::Kind::List: {
      const auto &x = a.as_list(), &y = b.as_list();
      if (x.size() != y.size() || a.is_tuple() != b.is_tuple()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!values_equal(x[i], y[i])) return false;
      return true;
    }
    case Value::Kind::Dict: {
      if (&a.as_dict() == &b.as_dict()) return true;
      if (a.is_namespace() || b.is_namespace()) return false;
      if (a.as_dict().size() != b.as_dict().size()) return false;
      for (size_t i = 0; i < a.as_dict().size(); ++i) {
        const Value* other = b.as_dict().find(a.as_dict().key_at(i, kNoTag));
        if (!other || !values_equal(a.as_dict().items()[i].second, *other)) return false;
      }
      return true;
    }
    case Value::Kind::Callable:
      return &a.as_callable() == &b.as_callable();
    default:
      return false;
  }
}

bool values_less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list()) {
    const auto &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (values_less(x[i], y[i])) return true;
      if (values_less(y[i], x[i])) return false;
    }
    return x.size() < y.size();
  }
  if (a.is_undefined() || b.is_undefined()) fail("UndefinedError", "cannot compare an undefined value");
  fail("TypeError", "'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;
  return n;
}

size_t utf8_offset(std::string_view s, size_t index) {
  size_t count = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (count == index) return i;
      ++count;
    }
  }
  return s.size();
}

}  // namespace keel::jinja
