#include "keel/plan/memory_ceiling.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "keel/plan/number_format.h"
#include "keel/util/error.h"

namespace keel::plan {
namespace {

std::optional<std::string> read_small_file(const char* path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// cgroup v2 writes "max" when unlimited; v1 writes a huge number instead.
std::optional<uint64_t> cgroup_memory_limit() {
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    auto text = read_small_file(path);
    if (!text) continue;
    try {
      size_t used = 0;
      unsigned long long v = std::stoull(*text, &used);
      if (used > 0 && v < (1ull << 60)) return v;
    } catch (const std::exception&) {
    }
  }
  return std::nullopt;
}

std::string percent(double fraction) { return std::to_string(static_cast<int>(std::lround(fraction * 100))) + "%"; }

}  // namespace

MemoryCeiling ceiling_from_flag(double gib) {
  // The upper bound only keeps the byte count from overflowing; no machine comes near it.
  if (!(gib > 0) || !std::isfinite(gib) || gib > 1e6) throw Error("--memory must be a positive number of GiB");
  char buf[64];
  std::snprintf(buf, sizeof buf, "--memory %g GiB", gib);
  return {static_cast<uint64_t>(gib * static_cast<double>(kGiB)), buf};
}

MemoryCeiling ceiling_from_meminfo(std::string_view meminfo, std::optional<uint64_t> cgroup_limit) {
  std::istringstream lines{std::string(meminfo)};
  std::string line;
  std::optional<uint64_t> total;
  while (std::getline(lines, line)) {
    if (line.rfind("MemTotal:", 0) != 0) continue;
    std::istringstream fields(line.substr(9));
    uint64_t kib = 0;
    if (fields >> kib) total = kib * 1024;
  }
  if (!total) throw Error("/proc/meminfo has no MemTotal line: pass --memory GiB");
  MemoryCeiling c;
  if (cgroup_limit && *cgroup_limit < *total) {
    c.bytes = static_cast<uint64_t>(static_cast<double>(*cgroup_limit) * kUsableRamFraction);
    c.source = percent(kUsableRamFraction) + " of the " + format_size(*cgroup_limit) +
               " cgroup memory limit (the machine has " + format_size(*total) + "; --memory overrides)";
  } else {
    c.bytes = static_cast<uint64_t>(static_cast<double>(*total) * kUsableRamFraction);
    c.source = percent(kUsableRamFraction) + " of " + format_size(*total) +
               " RAM (/proc/meminfo MemTotal; --memory overrides)";
  }
  return c;
}

MemoryCeiling machine_ceiling(std::optional<double> memory_gib) {
  if (memory_gib) return ceiling_from_flag(*memory_gib);
  auto meminfo = read_small_file("/proc/meminfo");
  if (!meminfo) throw Error("cannot read /proc/meminfo to size this machine's RAM: pass --memory GiB");
  return ceiling_from_meminfo(*meminfo, cgroup_memory_limit());
}

}  // namespace keel::plan
