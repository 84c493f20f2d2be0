#pragma once
// Which SIMD target the kernels run: the best this CPU supports, or one named target, so that one
// machine can run and measure every path it is able to (an AVX-512 machine runs the AVX2 kernels
// with KEEL_SIMD_TARGET=AVX2). The restriction covers the Highway kernels (simd_kernels.h and the
// KV attention kernels) and the hand-written AVX-512 ones (the *_x86.h files), which run only
// under an AVX3 target.
//
// Threads: restrict_simd_target and apply_simd_target_from_env are called once, at start-up,
// before any kernel runs; the queries may be called from any thread.
#include <string>
#include <vector>

namespace keel::ops {

// The targets this build has kernels for and this CPU can run, best first ("AVX3", "AVX2",
// "SSE4", "SSSE3", "SCALAR" on x86; "NEON", ... on ARM).
std::vector<std::string> runnable_simd_targets();

// Runs every kernel on the named target from now on (case-insensitive). Throws keel::Error naming
// the runnable targets when this CPU or build cannot run it.
void restrict_simd_target(const std::string& name);

// Back to the best target this CPU runs.
void clear_simd_target_restriction();

// restrict_simd_target($KEEL_SIMD_TARGET) when that is set and not empty.
void apply_simd_target_from_env();

// Whether the hand-written AVX-512 kernels may run: no restriction, or an AVX3 target.
bool avx512_kernels_allowed();

}  // namespace keel::ops
