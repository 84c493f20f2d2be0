#pragma once
// Matrix products with bf16 weights on CPUs with AVX512_BF16 (Zen 4 and later, Cooper Lake,
// Sapphire Rapids): activations are rounded to bf16 once per call and each VDPBF16PS multiplies
// 32 pairs, twice the f32 FMA rate. Highway 1.0 has no target for this instruction, so it lives in
// its own file compiled for it and is only called after a CPUID check.
// Threads: no shared state but the CPUID answer (cached once, thread-safely) and the SIMD restriction set
// at start-up (simd_target.h); any thread. The caller owns w, x and y; calls that write disjoint row
// ranges [r0, r1) of y may run at once.
#include <cstdint>

namespace keel::ops {

bool cpu_has_avx512_bf16();

// y[t * y_stride + r] = dot(w row r, x row t) for r in [r0, r1), t in [0, n_tokens); w and x are
// bf16 rows of `cols`. Each (row, token) sum is formed in the same order whatever the block sizes,
// so results do not depend on how many tokens or rows share a call.
void gemm_bf16_dp(const uint16_t* w, int64_t cols, int64_t r0, int64_t r1, const uint16_t* x, int64_t n_tokens,
                  float* y, int64_t y_stride);

// Runs `iterations` rounds of independent VDPBF16PS (64 flops each: 32 bf16 products and their
// sums) and returns the flops done: the ceiling of gemm_bf16_dp. 0 without AVX512_BF16.
double bf16_dp_burst(int64_t iterations, float* sink);

}  // namespace keel::ops
