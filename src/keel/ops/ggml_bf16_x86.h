#pragma once
// Matrix products for the ggml block formats (ggml_blocks.h) on CPUs with AVX512_BF16, AVX512BW
// and AVX512_VBMI (Zen 4, Sapphire Rapids and later), built like the MLX kernels (mlx_bf16_x86.h).
// Each block's scale is factored out of its dot product,
//   dot(x, d*sc*q - dmin*m) = d*sc * dot(x, q) - dmin*m * sum(x),
// so VDPBF16PS multiplies the raw integer codes (exact in bf16) by the activations rounded to bf16,
// as the bf16 path rounds them; the weights are never rounded and activations are never quantized.
// Rows are read in superblocks (one block of 256 for the K formats; 4 Q8_0/Q4_0/Q5_0/MXFP4 blocks
// of 32) widened into vectors of 32 bf16 codes, arranged so that float lane i of every
// vector of a superblock covers one scale's elements: the products of a superblock are summed per
// lane and scaled once. The activations are permuted into the same order once per call.
// One token widens the codes in registers (each byte is read once); several widen a task's rows
// into a per-thread panel reused by every token. Both run the same instruction sequence for each
// (row, token) sum, so one token gives the bits of its row among many, whatever the row range.
//
// Stateless; callable from any thread. The activations are prepared by the caller (one buffer per
// call), then read by every worker.
#include <cstdint>
#include <vector>

#include "keel/ops/ggml_blocks.h"

namespace keel::ops {

// Whether matmul runs this format through gemm_ggml_bf16 on this CPU: on every CPU with the
// instructions, except on Zen 4 for the formats the int16 kernels run faster there.
bool ggml_bf16_supported(WeightFormat f);

// Activations permuted into the kernels' code order, rounded to bf16 (past `cols`: zeros), and for
// formats with mins (Q4_K, Q5_K) each float lane's sum of the rounded values per superblock.
struct GgmlBf16Activations {
  std::vector<uint16_t> x;       // [n_tokens][x_stride]
  std::vector<float> lane_sums;  // [n_tokens][sums_stride]: [superblock][16]
  int64_t x_stride = 0, sums_stride = 0;
};

// Sizes `a` for n_tokens tokens of these rows (call once, on one thread).
void size_ggml_bf16_activations(const GgmlRows& w, int64_t n_tokens, GgmlBf16Activations& a);
// Fills tokens [t0, t1) of `a` from x ([n_tokens][cols]); disjoint ranges may run on different threads.
void prepare_ggml_bf16_activations(const GgmlRows& w, const float* x, int64_t t0, int64_t t1, GgmlBf16Activations& a);

// y[t * y_stride + (r - r0)] = dot(row r, x[t]) for r in [r0, r1), t < n_tokens. The same bits for
// any n_tokens and any row range.
void gemm_ggml_bf16(const GgmlRows& w, const GgmlBf16Activations& a, int64_t n_tokens, int64_t r0, int64_t r1,
                    float* y, int64_t y_stride);

}  // namespace keel::ops
