#pragma once
// Tests on every SIMD target: KEEL_SIMD_TARGET restricts the whole test process to one target's
// kernels (as it does keel's commands; CTest runs the numeric suites once more that way), and
// for_each_simd_target runs a check once per target in-process. Test threads only.
#include <functional>

namespace keel::test {

// Runs `body` once on each SIMD target this CPU and build can run (ops/simd_target.h), the kernels
// restricted to it, under a SCOPED_TRACE naming it; the best target is restored after. A path that
// is never this machine's default stays tested.
void for_each_simd_target(const std::function<void()>& body);

}  // namespace keel::test
