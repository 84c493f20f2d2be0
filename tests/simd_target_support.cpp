#include "simd_target_support.h"

#include <gtest/gtest.h>

#include <string>

#include "keel/ops/simd_target.h"

namespace keel::test {
namespace {

const bool kSimdTargetFromEnv = [] {
  ops::apply_simd_target_from_env();
  return true;
}();

}  // namespace

void for_each_simd_target(const std::function<void()>& body) {
  for (const std::string& target : ops::runnable_simd_targets()) {
    SCOPED_TRACE("SIMD target " + target);
    ops::restrict_simd_target(target);
    body();
  }
  ops::clear_simd_target_restriction();
}

}  // namespace keel::test
