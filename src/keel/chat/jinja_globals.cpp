// The global functions templates can call: range, namespace, dict, and transformers'
// raise_exception and strftime_now. Nothing here reaches files, the environment or the network.
#include <ctime>

#include "keel/chat/jinja_args.h"
#include "keel/chat/jinja_error.h"
#include "keel/chat/jinja_evaluator.h"
#include "keel/chat/jinja_operators.h"

namespace keel::jinja {
namespace {

std::tm system_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

}  // namespace

void install_globals(std::unordered_map<std::string, Value>& globals, Evaluator& ev) {
  globals["range"] = Value::callable("range", [&ev](CallArgs& a) {
    BoundArgs args(a, "range", {"start", "stop", "step"});
    int64_t start = 0, stop = 0, step = 1;
    if (!args.has(1)) {
      stop = require_int(args.get(0), "range() argument");
    } else {
      start = require_int(args.get(0), "range() argument");
      stop = require_int(args.get(1), "range() argument");
      if (args.has(2)) step = require_int(args.get(2), "range() argument");
    }
    if (step == 0) fail("ValueError", "range() arg 3 must not be zero");
    std::vector<Value> items;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      ev.count_iterations(1);
      items.push_back(Value::integer(i));
    }
    return Value::list(std::move(items));
  });
  globals["namespace"] = Value::callable("namespace", [](CallArgs& a) {
    auto d = std::make_shared<DictData>();
    d->is_namespace = true;
    for (const auto& p : a.positional) {
      if (!p.is_dict()) fail("TypeError", "namespace() positional argument must be a dict");
      for (const auto& [k, v] : p.as_dict().items()) d->set(k, v);
    }
    for (const auto& [k, v] : a.named) d->set(k, v);
    return Value::dict(d);
  });
  globals["dict"] = Value::callable("dict", [](CallArgs& a) {
    auto d = std::make_shared<DictData>();
    for (const auto& p : a.positional) {
      if (!p.is_dict()) fail("TypeError", "dict() positional argument must be a dict");
      for (const auto& [k, v] : p.as_dict().items()) d->set(k, v);
    }
    for (const auto& [k, v] : a.named) d->set(k, v);
    return Value::dict(d);
  });
  globals["raise_exception"] = Value::callable("raise_exception", [](CallArgs& a) -> Value {
    BoundArgs args(a, "raise_exception", {"message"});
    fail("TemplateError", args.get(0).to_text().text());
  });
  globals["strftime_now"] = Value::callable("strftime_now", [&ev](CallArgs& a) {
    BoundArgs args(a, "strftime_now", {"format"});
    if (!args.get(0).is_string()) fail("TypeError", "strftime_now() format must be a string");
    std::tm tm = ev.options().now ? ev.options().now() : system_now();
    const std::string& format = args.get(0).as_string();
    if (format.empty()) return Value::string("");
    std::string buf(format.size() * 8 + 64, '\0');
    size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &tm);
    buf.resize(n);
    return Value::string(buf);
  });
}

}  // namespace keel::jinja
