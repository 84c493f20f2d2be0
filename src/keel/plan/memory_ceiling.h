#pragma once
// The memory a plan must fit under: --memory when given, else a fixed share of the machine's RAM.
// The share is fixed rather than read from MemAvailable so the same machine gives the same plan
// whatever else happens to run; it leaves room for the OS, the agent client and an editor.
// Plain functions (machine_ceiling reads /proc/meminfo and the cgroup limit) that keep no state:
// any thread.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace keel::plan {

inline constexpr double kUsableRamFraction = 0.75;

struct MemoryCeiling {
  uint64_t bytes = 0;
  std::string source;  // "--memory 32 GiB", "75% of 62.7 GiB RAM (/proc/meminfo MemTotal)"
};

// From the --memory flag, in GiB; throws keel::Error unless it is a positive number.
MemoryCeiling ceiling_from_flag(double gib);

// From the text of /proc/meminfo and, when the process runs under a cgroup memory limit, that
// limit in bytes (whichever is lower counts). Throws keel::Error when MemTotal is missing.
MemoryCeiling ceiling_from_meminfo(std::string_view meminfo, std::optional<uint64_t> cgroup_limit);

// --memory if given, else this machine (Linux); elsewhere, an error asking for --memory.
MemoryCeiling machine_ceiling(std::optional<double> memory_gib);

}  // namespace keel::plan
