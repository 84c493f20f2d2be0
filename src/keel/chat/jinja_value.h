#pragma once
// The values a Jinja template computes with, modelled on the Python objects jinja2 hands to
// templates: Undefined, None, bool, int, float, str, list/tuple, dict and callables. Lists and dicts
// are shared and never mutated after construction (Hugging Face renders in jinja2's immutable
// sandbox); the only mutable object is namespace(), which `set ns.x = ...` writes to.
// Threads: a Value is immutable once built, and copies share its data (shared_ptr), so values may
// be read from many threads at once; a namespace() dict belongs to the one render that made it.
// DictData::set is for building a dict before it is shared (a render context, say).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "keel/chat/tagged_text.h"

namespace keel::jinja {

class Value;

struct ListData {
  std::vector<Value> items;
  bool is_tuple = false;  // only changes how it prints: ('a', 'b') instead of ['a', 'b']
  // map/select/reject return Python generators in jinja2: iterable, but without len() and not
  // JSON-serializable. Templates that forget `| list` fail under transformers, so they fail here.
  bool is_generator = false;
  int depth = 1;  // containers nested inside, bounded so printing and freeing cannot overflow the stack
};

// How deeply lists and dicts may nest inside each other.
constexpr int kMaxValueNesting = 256;

class DictData {
 public:
  bool is_namespace = false;
  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value value);  // insertion order is kept, like Python dicts
  // Keys that are not strings (`{0: 'a'}`) are kept as values; items() shows them as str(key).
  const Value* find(const Value& key) const;
  void set(const Value& key, Value value);
  Value key_at(size_t i, Tag tag) const;
  const std::vector<std::pair<std::string, Value>>& items() const { return items_; }
  size_t size() const;
  int depth() const { return depth_; }

 private:
  int depth_ = 1;
  static std::string index_key(const Value& key);

  std::vector<std::pair<std::string, Value>> items_;
  std::vector<std::shared_ptr<const Value>> non_string_keys_;  // parallel to items_, null for str keys
  std::unordered_map<std::string, size_t> index_;
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;
};

struct Callable {
  std::string name;
  std::function<Value(CallArgs&)> call;
};

class Value {
 public:
  enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Callable };

  Value() = default;  // Undefined
  static Value undefined(std::string hint);
  static Value none(Tag tag = kNoTag);
  static Value boolean(bool b, Tag tag = kNoTag);
  static Value integer(int64_t i, Tag tag = kNoTag);
  static Value number(double f, Tag tag = kNoTag);
  static Value string(std::string s, Tag tag = kNoTag);
  static Value string(TaggedText t);
  static Value list(std::vector<Value> items, Tag tag = kNoTag, bool is_tuple = false);
  static Value generator(std::vector<Value> items, Tag tag = kNoTag);
  // Markup: a string marked safe (| safe, | escape); `+` HTML-escapes plain strings joined to it.
  static Value markup(TaggedText t);
  bool is_markup() const { return markup_; }
  bool is_generator() const { return is_list() && list_->is_generator; }
  // 0 for scalars, 1 for a flat list or dict, and so on.
  int nesting() const;
  static Value dict(std::shared_ptr<DictData> d, Tag tag = kNoTag);
  static Value callable(std::string name, std::function<Value(CallArgs&)> fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_callable() const { return kind_ == Kind::Callable; }
  bool is_namespace() const { return is_dict() && dict_->is_namespace; }

  // Provenance of a scalar or container (strings keep per-byte runs in their TaggedText).
  Tag tag() const { return tag_; }
  Value with_tag(Tag t) const;

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::Bool ? (b_ ? 1 : 0) : i_; }
  double as_double() const { return kind_ == Kind::Float ? f_ : static_cast<double>(as_int()); }
  const TaggedText& as_tagged() const { return *str_; }
  const std::string& as_string() const { return str_->text(); }
  const std::vector<Value>& as_list() const { return list_->items; }
  bool is_tuple() const { return list_->is_tuple; }
  const DictData& as_dict() const { return *dict_; }
  DictData& mutable_namespace() const { return *dict_; }
  const Callable& as_callable() const { return *fn_; }
  const std::string& undefined_hint() const;

  // Python truthiness.
  bool truthy() const;
  // Python type name, as error messages say it: str, int, dict, NoneType...
  const std::string& type_name() const;
  // str(x), the way `{{ x }}` prints it; Undefined prints as nothing.
  TaggedText to_text() const;
  // repr(x), used when containers print their elements.
  TaggedText repr() const;
  // The elements `for x in value` visits: list items, dict keys, string characters.
  std::vector<Value> iterate() const;
  // len(x); throws for values without a length.
  size_t length() const;

 private:
  Kind kind_ = Kind::Undefined;
  Tag tag_ = kNoTag;
  bool markup_ = false;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const TaggedText> str_;  // String; for Undefined the hint
  std::shared_ptr<ListData> list_;
  std::shared_ptr<DictData> dict_;
  std::shared_ptr<const Callable> fn_;
};

// Python ==.
bool values_equal(const Value& a, const Value& b);
// Python <, for numbers, strings and lists; throws TypeError otherwise.
bool values_less(const Value& a, const Value& b);
// Python repr(float): shortest round-trip digits, scientific below 1e-4 and from 1e16.
std::string python_float_repr(double f);
// Number of Unicode code points in UTF-8 text (Python's len(str)).
size_t utf8_length(std::string_view s);
// Byte offset of code point `index` (clamped to the end).
size_t utf8_offset(std::string_view s, size_t index);

}  // namespace keel::jinja
