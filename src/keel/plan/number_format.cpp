#include "keel/plan/number_format.h"

#include <cstdio>

namespace keel::plan {

std::string format_count(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

double bytes_to_gib(uint64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(kGiB); }

std::string format_size(uint64_t bytes) {
  char buf[48];
  if (bytes < kGiB) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / static_cast<double>(kMiB));
    return buf;
  }
  double gib = bytes_to_gib(bytes);
  std::snprintf(buf, sizeof buf, gib < 10 ? "%.2f GiB" : "%.1f GiB", gib);
  return buf;
}

std::string format_parameters(int64_t n) {
  char buf[48];
  const double x = static_cast<double>(n);
  if (x >= 1e9) {
    std::snprintf(buf, sizeof buf, x >= 1e11 ? "%.1fB" : x >= 1e10 ? "%.2fB" : "%.3fB", x / 1e9);
  } else if (x >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.2fM", x / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(n));
  }
  return buf;
}

}  // namespace keel::plan
