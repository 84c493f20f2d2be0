#pragma once
// Command-line flags for keel subcommands: `--name value`, `--name=value` and boolean `--flag`.
// Every subcommand declares the flags it accepts, so a typo is an error instead of being ignored.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace keel::cli {

class Args {
 public:
  // `value_flags` take a value, `bool_flags` do not. Throws keel::Error on unknown flags.
  Args(const std::vector<std::string>& argv, const std::set<std::string>& value_flags,
       const std::set<std::string>& bool_flags = {});

  bool has(const std::string& name) const;
  std::optional<std::string> get(const std::string& name) const;
  std::string get_or(const std::string& name, const std::string& fallback) const;
  std::string require(const std::string& name) const;  // throws naming the missing flag
  std::vector<std::string> get_all(const std::string& name) const;  // repeatable flags
  // Range-checked (parse_int_flag / parse_number_flag): `fallback` when the flag is absent.
  long get_int(const std::string& name, long fallback, long min, long max) const;
  double get_double(const std::string& name, double fallback, double min, double max) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::multimap<std::string, std::string> values_;
  std::set<std::string> bools_;
  std::vector<std::string> positional_;
};

// The one parser of numeric flag values (`flag` without its dashes, `text` as given). A value
// that is not a plain number (trailing characters, empty, NaN, infinity) or lies outside
// [min, max] throws keel::Error naming the flag and the range: numbers are never wrapped, clamped
// or truncated, so `--port 70000` is refused instead of binding port 4464.
long parse_int_flag(const std::string& flag, const std::string& text, long min, long max);
// `above_min`: min itself is refused too (sizes that must be positive).
double parse_number_flag(const std::string& flag, const std::string& text, double min, double max,
                         bool above_min = false);

// Bounds several commands share. Far past real use, and small enough that sizes computed from
// them (bytes of KV per token times tokens) cannot overflow.
inline constexpr long kMaxThreads = 1024;
inline constexpr long kMaxTokenCount = 1L << 24;  // contexts, prompts and generated tokens
inline constexpr double kMaxGiB = 1 << 20;         // memory sizes (--memory, --kv-memory): 1 PiB
inline constexpr double kMaxTemperature = 100;      // logits over 100 are nearly uniform already

}  // namespace keel::cli
