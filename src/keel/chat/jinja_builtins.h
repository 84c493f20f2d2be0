#pragma once
// The builtin filters, tests, methods and globals the interpreter knows, each group in its own
// file. They are looked up by name; the parser-time check uses the *_exists functions so an
// unknown filter fails the whole template, as it does in jinja2.
// The lookup tables are constants (function-local statics, built once). Filters, tests and globals
// run inside one render, on its thread, with that render's Evaluator; the rest are pure functions.
#include <string>
#include <utility>

#include "keel/chat/jinja_value.h"

namespace keel::jinja {

class Evaluator;

bool filter_exists(const std::string& name);
Value apply_filter(Evaluator& ev, const std::string& name, const Value& input, const CallArgs& args);

bool test_exists(const std::string& name);
bool apply_test(Evaluator& ev, const std::string& name, const Value& input, const CallArgs& args);

// Python methods of str, dict and list (`s.strip()`, `d.items()`); `found` is false when the
// value has no method of that name.
Value call_method(const Value& self, const std::string& name, const CallArgs& args, bool& found);
bool has_method(const Value& self, const std::string& name);

// json.dumps(x, ensure_ascii=False, indent=..., separators=..., sort_keys=...), the way
// transformers defines tojson; provenance tags of the values carry over to the text.
struct JsonStyle {
  int indent = -1;  // -1: no newlines
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;  // escape every non-ASCII character as \uXXXX
};
TaggedText to_json(const Value& v, const JsonStyle& style);

// Python string helpers shared by filters and methods.
// The byte range [first, second) left after Python's strip/lstrip/rstrip (chars == nullptr:
// whitespace), so callers can crop provenance along with the text.
std::pair<size_t, size_t> python_strip_range(const std::string& s, const std::string* chars, bool left, bool right);
std::string python_upper(const std::string& s);
std::string python_lower(const std::string& s);
std::string python_title(const std::string& s);
std::string python_capitalize(const std::string& s);
bool is_python_space(unsigned char c);
// markupsafe's escape: & < > " ' become entities.
std::string html_escape(const std::string& s);

}  // namespace keel::jinja
