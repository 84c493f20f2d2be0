#pragma once
// Matrix products of packed integer codes (the ggml block formats of ggml_blocks.h, MLX affine
// 4/8-bit) on every SIMD target Highway compiles (AVX2, AVX-512, SSE4, NEON, ...): integer dot
// products of the raw codes with the activations quantized to int16, as llama.cpp's kernels do
// with int8, but 256 times finer.
//
// Activations: each token's 32-element blocks are quantized to int16, q = round(x * L / amax) with
// amax = max |x| over the block and L = 32767, so x ~= scale * q with scale = amax / L. The error
// is at most amax / 2L per element, 2^-16 of the block's largest value: under bf16's rounding
// (2^-9 of each value, what the AVX512_BF16 kernels do), and far under the goldens' tolerance.
// (int8 activations, llama.cpp's choice, move the tiny-toolcaller logits by 0.11-0.27: over it.)
// Against Q6_K rows L is 16383 (i16_activation_limit), so that a unit's sum fits int32.
//
// Weights: each unit of 32 codes under one scale (a Q8_0/Q4_0/Q5_0/MXFP4 block (MXFP4 codes as
// twice their e2m1 value, integers), a Q4_K/Q5_K sub-block, two Q6_K sub-blocks with their int8
// scales multiplied in, 32 elements of an MLX group) is widened to int16 in registers and
// multiplied pairwise with the activations, and the unit's products are summed exactly in int32
// (at most 32 x 4096 x 16383, Q6_K's, or 32 x 255 x 32767, MLX 8-bit's). The float work per unit
// and token is one product and one or two adds, into partial sum u % 8 of the (row, token):
//   P[u % 8] = (P[u % 8] + (d * sc * scale_x) * float(unit sum)) + c * sum_x
// (c = -dmin * m for Q4_K/Q5_K, the group's bias for MLX, no second add for the other formats),
// and the output is a fixed tree of the eight partials (int16_dot.cpp). Each (row, token) runs that
// same sequence for any number of tokens, any row range and on every target, so one token gives
// the bits of its row among many (chunked prefill == one-shot, batch invariance), and every SIMD
// target gives the same bits.
//
// Decode (one token, or a few) walks a row at a time and reduces four units' int32 lanes together
// into one vector of four unit sums, whose float work is then one vector operation. Prefill on x86
// runs token tiles with rows across the lanes: a task's rows are decoded once and interleaved by groups
// of rows, so one load gives a pair of codes of every row of a group and one broadcast the pair of
// a token's activations (for two groups at once), and the float work of a unit is one vector per
// token for the group's rows. Q4_0, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K and MXFP4 rows interleaved at load (interleaved_rows.h; AVX2 and up) are
// already in groups: decode multiplies them in place, rows across the lanes, and the prefill tiles
// take their groups from them with no row decoded.
// The x86 pairs are VPMADDWD then an add; on CPUs with AVX512_VNNI (the AVX3 target) one
// VPDPWSSD, the same int32 sums, with odd pairs in a second chain to cover its latency.
//
// Stateless; callable from any thread. The activations are prepared by the caller (one buffer per
// call), then read by every worker.
#include <cstdint>
#include <vector>

#include "keel/ops/ggml_blocks.h"
#include "keel/ops/simd_kernels.h"

namespace keel::ops {

// The largest quantized activation L for products with rows of format f (see above).
int16_t i16_activation_limit(WeightFormat f);

// Whether gemm_ggml_i16 has a kernel for this format (every ggml block format keel reads).
bool ggml_i16_supported(WeightFormat f);
// Whether this CPU's target reads rows of f faster interleaved (interleaved_rows.h): x86 targets
// with 8-row groups, for every ggml block format keel reads. Interleaved rows run on every
// target, with the same bits.
bool i16_reads_interleaved_rows(WeightFormat f);
// Whether gemm_mlx_i16 runs these rows (4 or 8 bits, groups a multiple of 32 that divide the row).
bool mlx_i16_supported(const MlxRows& w);

// Activations quantized per block of 32 (cols a multiple of 32). MLX 4-bit rows keep two codes per
// byte, element 2k in the low nibble and 2k + 1 in the high one; their activations are stored with
// each block's even elements first, then its odd ones (pairs_split), so that one nibble of 16
// consecutive bytes meets 16 consecutive activations.
struct I16Activations {
  std::vector<int16_t> q;    // [n_tokens][cols]
  std::vector<float> scale;  // [n_tokens][cols / 32]: x ~= scale * q
  std::vector<float> sum;    // [n_tokens][cols / 32]: scale * (sum of the block's q)
  std::vector<int32_t> qsum; // [n_tokens][cols / 32]: the sum of the block's q (subtracts a code offset exactly)
  int64_t cols = 0;
  bool pairs_split = false;
  int16_t limit = 32767;  // L: |q| <= limit
};

// Sizes `a` for n_tokens tokens of `cols` (call once, on one thread).
void size_i16_activations(int64_t cols, int64_t n_tokens, bool pairs_split, I16Activations& a, int16_t limit = 32767);
// Quantizes tokens [t0, t1) of x ([n_tokens][cols]); disjoint ranges may run on different threads.
void quantize_i16_activations(const float* x, int64_t t0, int64_t t1, I16Activations& a);

// y[t * y_stride + (r - r0)] = dot(row r, x[t]) for r in [r0, r1), t < n_tokens. The same bits for
// any n_tokens and any row range. The activations: pairs_split false.
void gemm_ggml_i16(const GgmlRows& w, const I16Activations& a, int64_t n_tokens, int64_t r0, int64_t r1, float* y,
                   int64_t y_stride);
// The same for MLX rows; the activations: pairs_split for 4 bits, not for 8.
void gemm_mlx_i16(const MlxRows& w, const I16Activations& a, int64_t n_tokens, int64_t r0, int64_t r1, float* y,
                  int64_t y_stride);

}  // namespace keel::ops
