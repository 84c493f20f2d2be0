#include "keel/ops/simd_target.h"

#include <hwy/targets.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>

#include "keel/util/error.h"

namespace keel::ops {
namespace {

std::atomic<bool> g_avx512_allowed{true};

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Each target bit this build compiled and the CPU supports, best (lowest bit) first.
std::vector<int64_t> runnable_bits() {
  static const int64_t supported = hwy::SupportedTargets();  // before any restriction
  std::vector<int64_t> bits;
  for (int64_t t = HWY_TARGETS & supported; t != 0; t &= t - 1) bits.push_back(t & ~(t - 1));
  return bits;
}

}  // namespace

std::vector<std::string> runnable_simd_targets() {
  std::vector<std::string> names;
  for (const int64_t bit : runnable_bits()) names.emplace_back(hwy::TargetName(bit));
  return names;
}

void restrict_simd_target(const std::string& name) {
  const std::string wanted = upper(name);
  const std::vector<int64_t> bits = runnable_bits();
  const auto it = std::find_if(bits.begin(), bits.end(), [&](int64_t b) { return wanted == hwy::TargetName(b); });
  if (it == bits.end()) {
    std::string list;
    for (const std::string& n : runnable_simd_targets()) list += (list.empty() ? "" : ", ") + n;
    throw Error("SIMD target '" + name + "' cannot run here; this CPU and build run: " + list);
  }
  hwy::SetSupportedTargetsForTest(*it);
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
  g_avx512_allowed = wanted.rfind("AVX3", 0) == 0;
}

void clear_simd_target_restriction() {
  hwy::SetSupportedTargetsForTest(0);
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
  g_avx512_allowed = true;
}

void apply_simd_target_from_env() {
  const char* name = std::getenv("KEEL_SIMD_TARGET");
  if (name != nullptr && *name != '\0') restrict_simd_target(name);
}

bool avx512_kernels_allowed() { return g_avx512_allowed; }

}  // namespace keel::ops
