#include "args.h"

#include <cstdlib>

#include "keel/util/error.h"

namespace keel::cli {

Args::Args(const std::vector<std::string>& argv, const std::set<std::string>& value_flags,
           const std::set<std::string>& bool_flags) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.size() < 3 || a.rfind("--", 0) != 0) {
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2);
    std::optional<std::string> inline_value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (bool_flags.count(name)) {
      if (inline_value) throw Error("--" + name + " takes no value");
      bools_.insert(name);
    } else if (value_flags.count(name)) {
      if (inline_value) {
        values_.emplace(name, *inline_value);
      } else {
        if (i + 1 >= argv.size()) throw Error("--" + name + " needs a value");
        values_.emplace(name, argv[++i]);
      }
    } else {
      throw Error("unknown flag --" + name);
    }
  }
}

bool Args::has(const std::string& name) const { return bools_.count(name) || values_.count(name); }

std::optional<std::string> Args::get(const std::string& name) const {
  auto range = values_.equal_range(name);
  if (range.first == range.second) return std::nullopt;
  return std::prev(range.second)->second;  // the last occurrence wins
}

std::string Args::get_or(const std::string& name, const std::string& fallback) const {
  return get(name).value_or(fallback);
}

std::string Args::require(const std::string& name) const {
  auto v = get(name);
  if (!v) throw Error("missing required flag --" + name);
  return *v;
}

std::vector<std::string> Args::get_all(const std::string& name) const {
  std::vector<std::string> out;
  auto range = values_.equal_range(name);
  for (auto it = range.first; it != range.second; ++it) out.push_back(it->second);
  return out;
}

long Args::get_int(const std::string& name, long fallback) const {
  auto v = get(name);
  if (!v) return fallback;
  char* end = nullptr;
  long x = std::strtol(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0') throw Error("--" + name + " expects an integer, got '" + *v + "'");
  return x;
}

double Args::get_double(const std::string& name, double fallback) const {
  auto v = get(name);
  if (!v) return fallback;
  char* end = nullptr;
  double x = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0') throw Error("--" + name + " expects a number, got '" + *v + "'");
  return x;
}

}  // namespace keel::cli
