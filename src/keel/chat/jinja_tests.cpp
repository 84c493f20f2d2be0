// jinja2's builtin tests (`x is defined`, `x is string`...), with Python's type rules: bool counts
// as a number, and dicts are sequences.
#include <functional>
#include <map>

#include "keel/chat/jinja_args.h"
#include "keel/chat/jinja_builtins.h"
#include "keel/chat/jinja_evaluator.h"
#include "keel/chat/jinja_operators.h"

namespace keel::jinja {
namespace {

using TestFn = std::function<bool(const Value&, const CallArgs&)>;

const Value& arg(const CallArgs& a, const std::string& test) {
  if (a.positional.empty()) fail("TypeError", "test '" + test + "' needs an argument");
  return a.positional[0];
}

const std::map<std::string, TestFn>& tests() {
  static const std::map<std::string, TestFn> table = [] {
    std::map<std::string, TestFn> t;
    t["defined"] = [](const Value& v, const CallArgs&) { return !v.is_undefined(); };
    t["undefined"] = [](const Value& v, const CallArgs&) { return v.is_undefined(); };
    t["none"] = [](const Value& v, const CallArgs&) { return v.is_none(); };
    t["boolean"] = [](const Value& v, const CallArgs&) { return v.is_bool(); };
    t["true"] = [](const Value& v, const CallArgs&) { return v.is_bool() && v.as_bool(); };
    t["false"] = [](const Value& v, const CallArgs&) { return v.is_bool() && !v.as_bool(); };
    t["integer"] = [](const Value& v, const CallArgs&) { return v.is_int(); };
    t["float"] = [](const Value& v, const CallArgs&) { return v.is_float(); };
    t["number"] = [](const Value& v, const CallArgs&) { return v.is_number(); };
    t["string"] = [](const Value& v, const CallArgs&) { return v.is_string(); };
    t["mapping"] = [](const Value& v, const CallArgs&) { return v.is_dict() && !v.is_namespace(); };
    // Undefined defines __iter__ (empty) but not __getitem__, so it is iterable and not a sequence.
    t["iterable"] = [](const Value& v, const CallArgs&) { return v.is_undefined() || v.is_string() || v.is_list() || (v.is_dict() && !v.is_namespace()); };
    t["sequence"] = [](const Value& v, const CallArgs&) { return v.is_string() || (v.is_list() && !v.is_generator()) || (v.is_dict() && !v.is_namespace()); };
    t["callable"] = [](const Value& v, const CallArgs&) { return v.is_callable(); };
    t["sameas"] = [](const Value& v, const CallArgs& a) {
      const Value& o = arg(a, "sameas");
      if (v.is_none() || v.is_bool() || v.is_undefined()) return values_equal(v, o) && v.kind() == o.kind();
      return values_equal(v, o);
    };
    auto eq = [](const Value& v, const CallArgs& a) { return values_equal(v, arg(a, "eq")); };
    t["equalto"] = t["eq"] = t["=="] = eq;
    t["ne"] = t["!="] = [](const Value& v, const CallArgs& a) { return !values_equal(v, arg(a, "ne")); };
    t["lt"] = t["lessthan"] = t["<"] = [](const Value& v, const CallArgs& a) { return values_less(v, arg(a, "lt")); };
    t["gt"] = t["greaterthan"] = t[">"] = [](const Value& v, const CallArgs& a) { return values_less(arg(a, "gt"), v); };
    t["le"] = t["<="] = [](const Value& v, const CallArgs& a) { return !values_less(arg(a, "le"), v); };
    t["ge"] = t[">="] = [](const Value& v, const CallArgs& a) { return !values_less(v, arg(a, "ge")); };
    t["in"] = [](const Value& v, const CallArgs& a) { return value_contains(arg(a, "in"), v); };
    auto require_int = [](const Value& v) {
      if (v.is_undefined()) raise_undefined(v);
      if (!v.is_int() && !v.is_bool()) fail("TypeError", "expected an integer, got " + v.type_name());
      return v.as_int();
    };
    t["odd"] = [require_int](const Value& v, const CallArgs&) { return require_int(v) % 2 != 0; };
    t["even"] = [require_int](const Value& v, const CallArgs&) { return require_int(v) % 2 == 0; };
    t["divisibleby"] = [require_int](const Value& v, const CallArgs& a) {
      int64_t d = require_int(arg(a, "divisibleby"));
      if (d == 0) fail("ZeroDivisionError", "integer division or modulo by zero");
      return require_int(v) % d == 0;
    };
    t["lower"] = [](const Value& v, const CallArgs&) { return v.is_string() && python_lower(v.as_string()) == v.as_string(); };
    t["upper"] = [](const Value& v, const CallArgs&) { return v.is_string() && python_upper(v.as_string()) == v.as_string(); };
    t["escaped"] = [](const Value&, const CallArgs&) { return false; };
    return t;
  }();
  return table;
}

}  // namespace

bool test_exists(const std::string& name) { return tests().count(name) != 0 || name == "filter" || name == "test"; }

bool apply_test(Evaluator&, const std::string& name, const Value& input, const CallArgs& args) {
  if (name == "filter" || name == "test") {
    const Value& n = arg(args, name);
    return n.is_string() && (name == "filter" ? filter_exists(n.as_string()) : test_exists(n.as_string()));
  }
  auto it = tests().find(name);
  if (it == tests().end()) fail("TemplateRuntimeError", "No test named '" + name + "'");
  return it->second(input, args);
}

}  // namespace keel::jinja
