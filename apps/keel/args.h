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
  long get_int(const std::string& name, long fallback) const;
  double get_double(const std::string& name, double fallback) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::multimap<std::string, std::string> values_;
  std::set<std::string> bools_;
  std::vector<std::string> positional_;
};

}  // namespace keel::cli
