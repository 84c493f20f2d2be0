#pragma once
// MLX 4- and 8-bit matrix products on CPUs with AVX512_BF16, AVX512BW and AVX512_VBMI (Zen 4,
// Sapphire Rapids and later). The affine form is factored per group,
//   dot(x, s*q + b) = s * dot(x, q) + b * sum(x),
// so VDPBF16PS multiplies the raw codes q (0..15 or 0..255, exact in bf16) by x rounded to bf16
// (as the bf16 path rounds it); the weights are never rounded. The codes are widened in registers
// for one token (decode: each packed byte is read once) and into a per-task panel of bf16 codes for
// several (prefill: the panel is reused for every token of the call). Both feed the same sequence
// of instructions to each (row, token) sum, so one token gives the bits of row t of many.
//
// Stateless; callable from any thread. The activations are prepared by the caller (one buffer per
// call), then read by every worker.
#include <cstdint>
#include <vector>

#include "keel/ops/simd_kernels.h"

namespace keel::ops {

// Whether gemm_mlx_bf16 can run on this CPU for these rows (4 or 8 bits, group 32, 64 or 128).
bool mlx_bf16_supported(const MlxRows& w);

// Activations in the order of the kernel's widened codes, rounded to bf16, and the sum of each
// group of the rounded values (the bias term). Elements past `cols` are zero.
struct MlxBf16Activations {
  std::vector<uint16_t> x;         // [n_tokens][x_stride]
  std::vector<float> group_sums;   // [n_tokens][sums_stride]
  int64_t x_stride = 0, sums_stride = 0;
};

// Sizes `a` for n_tokens tokens of these rows (call once, on one thread).
void size_mlx_bf16_activations(const MlxRows& w, int64_t n_tokens, MlxBf16Activations& a);
// Fills tokens [t0, t1) of `a` from x ([n_tokens][cols]); disjoint token ranges may run on
// different threads at once.
void prepare_mlx_bf16_activations(const MlxRows& w, const float* x, int64_t t0, int64_t t1, MlxBf16Activations& a);

// y[t * y_stride + (r - r0)] = dot(row r, x[t]) for r in [r0, r1), t < n_tokens. The same bits for
// any n_tokens and any row range.
void gemm_mlx_bf16(const MlxRows& w, const MlxBf16Activations& a, int64_t n_tokens, int64_t r0, int64_t r1, float* y,
                   int64_t y_stride);

}  // namespace keel::ops
