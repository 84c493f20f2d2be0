#pragma once
// Binds the arguments of a builtin call (filter, test, method, global) to its parameter names the
// way Python does: positionals first, then keywords; unknown or surplus arguments are errors.
// A BoundArgs is a local of one builtin call, on that render's thread; it copies the values it binds.
#include <initializer_list>
#include <string>
#include <vector>

#include "keel/chat/jinja_error.h"
#include "keel/chat/jinja_value.h"

namespace keel::jinja {

class BoundArgs {
 public:
  BoundArgs(const CallArgs& args, const std::string& function, std::initializer_list<const char*> names)
      : names_(names.begin(), names.end()), values_(names_.size()), present_(names_.size(), false) {
    if (args.positional.size() > names_.size())
      fail("TypeError", function + "() takes at most " + std::to_string(names_.size()) + " arguments (" +
                            std::to_string(args.positional.size()) + " given)");
    for (size_t i = 0; i < args.positional.size(); ++i) {
      values_[i] = args.positional[i];
      present_[i] = true;
    }
    for (const auto& [key, value] : args.named) {
      size_t i = 0;
      while (i < names_.size() && key != names_[i]) ++i;
      if (i == names_.size()) fail("TypeError", function + "() got an unexpected keyword argument '" + key + "'");
      values_[i] = value;
      present_[i] = true;
    }
  }

  bool has(size_t i) const { return present_[i]; }
  const Value& get(size_t i) const { return values_[i]; }
  Value get_or(size_t i, Value fallback) const { return present_[i] ? values_[i] : fallback; }

 private:
  std::vector<std::string> names_;
  std::vector<Value> values_;
  std::vector<bool> present_;
};

}  // namespace keel::jinja
