#include "args.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
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

long Args::get_int(const std::string& name, long fallback, long min, long max) const {
  auto v = get(name);
  return v ? parse_int_flag(name, *v, min, max) : fallback;
}

double Args::get_double(const std::string& name, double fallback, double min, double max) const {
  auto v = get(name);
  return v ? parse_number_flag(name, *v, min, max) : fallback;
}

namespace {

// Bounds as people write them: 1048576, not 1.04858e+06.
std::string bound_text(double x) {
  if (x == std::floor(x) && std::fabs(x) < 1e15) return std::to_string(static_cast<long long>(x));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// The value as given, cut short and with control characters shown as '?', so the one-line error
// stays one line whatever was passed.
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (size_t i = 0; i < text.size() && i < 40; ++i) out += std::iscntrl(static_cast<unsigned char>(text[i])) ? '?' : text[i];
  return out + (text.size() > 40 ? "...'" : "'");
}

}  // namespace

long parse_int_flag(const std::string& flag, const std::string& text, long min, long max) {
  const std::string range = "expected a whole number from " + std::to_string(min) + " to " + std::to_string(max);
  long n = 0;
  const char* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, n);
  if (text.empty() || (ec != std::errc() && ec != std::errc::result_out_of_range) || at != end)
    throw Error("--" + flag + ": " + quoted(text) + " is not a whole number (" + range + ")");
  if (ec == std::errc::result_out_of_range || n < min || n > max)
    throw Error("--" + flag + ": " + quoted(text) + " is out of range (" + range + ")");
  return n;
}

double parse_number_flag(const std::string& flag, const std::string& text, double min, double max, bool above_min) {
  const std::string range = std::string("expected a number ") + (above_min ? "above " : "from ") + bound_text(min) +
                            (above_min ? " and at most " : " to ") + bound_text(max);
  double x = 0;
  const char* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, x);
  // from_chars reads "nan" and "inf" as numbers; no flag means either.
  if (text.empty() || (ec != std::errc() && ec != std::errc::result_out_of_range) || at != end || std::isnan(x))
    throw Error("--" + flag + ": " + quoted(text) + " is not a number (" + range + ")");
  if (ec == std::errc::result_out_of_range || !std::isfinite(x) || x < min || x > max || (above_min && x == min))
    throw Error("--" + flag + ": " + quoted(text) + " is out of range (" + range + ")");
  return x;
}

}  // namespace keel::cli
