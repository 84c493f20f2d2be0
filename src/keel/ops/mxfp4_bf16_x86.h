#pragma once
// MXFP4 matrix products (gpt-oss experts) on CPUs with AVX512_BF16, AVX512BW and AVX512_VBMI.
// Every MXFP4 value (an e2m1 code times a power of two) is exact in bf16, so rows are widened to
// bf16 and multiplied by the activations rounded to bf16, as the bf16 path does: for several
// tokens a task's rows are widened once into a panel that gemm_bf16_dp (bf16_dot_x86.h) runs on;
// for one token they are widened in registers and summed in gemm_bf16_dp's order, so a decode
// step gives the bits of its row in a prefill chunk. Stateless; callable from any thread.
#include <cstdint>

#include "keel/ops/simd_kernels.h"

namespace keel::ops {

// Whether gemm_mxfp4_bf16 can run on this CPU.
bool mxfp4_bf16_supported();

// y[t * y_stride + (r - r0)] = dot(row r, x[t]) for r in [r0, r1), t < n_tokens; x is bf16
// ([n_tokens][cols]). The same bits for any n_tokens and any row range.
void gemm_mxfp4_bf16(const Mxfp4Rows& w, const uint16_t* x, int64_t n_tokens, int64_t r0, int64_t r1, float* y,
                     int64_t y_stride);

}  // namespace keel::ops
