#pragma once
// Python operators and member access with jinja2's rules, shared by the evaluator and builtins.
// Pure functions of their arguments (values are read, never changed): any thread.
#include <cstdint>
#include <string>

#include "keel/chat/jinja_value.h"

namespace keel::jinja {

// Attribute and item access with jinja2's rules (methods first for `.`, keys first for `[]`);
// a missing member is an Undefined that remembers why.
Value get_attribute(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
// Python's `a in b`.
bool value_contains(const Value& container, const Value& item);
// Raises the UndefinedError an Undefined stands for.
[[noreturn]] void raise_undefined(const Value& v);

// Binary arithmetic: + - * / // % ** with Python's types, results and TypeErrors.
Value arithmetic(const std::string& op, const Value& a, const Value& b);
// obj[start:stop:step] for lists and strings (by code point, keeping provenance).
Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step);
// An int (or bool) argument, else TypeError naming `what`.
int64_t require_int(const Value& v, const char* what);

}  // namespace keel::jinja
