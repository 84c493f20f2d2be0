#pragma once
// How the plan prints numbers: byte counts with thousands separators (so the hand arithmetic in
// docs and tests can be compared digit by digit) and sizes in GiB, the unit --memory takes
// (MiB for the tiny test models).
// Pure functions of their arguments: any thread.
#include <cstdint>
#include <string>

namespace keel::plan {

std::string format_count(int64_t n);      // 327680 -> "327,680"
std::string format_size(uint64_t bytes);  // "40.0 GiB", "6.25 GiB", "3.4 MiB" under 1 GiB
double bytes_to_gib(uint64_t bytes);
std::string format_parameters(int64_t n);  // "30.5B", "3.35B", "671.0B", "3.4M": the way counts are published

inline constexpr uint64_t kGiB = 1ull << 30;
inline constexpr uint64_t kMiB = 1ull << 20;

}  // namespace keel::plan
