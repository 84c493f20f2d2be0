#pragma once
// Matrix products of packed integer codes (the ggml block formats of ggml_blocks.h, MLX affine
// 4/8-bit) on every SIMD target Highway compiles (AVX2, AVX-512, SSE4, NEON, ...): integer dot
// products of the raw codes with the activations quantized to int16, as llama.cpp's kernels do
// with int8, but 256 times finer.
//
// Activations: each token's 32-element blocks are quantized to int16, q = round(x * 32767 / amax)
// with amax = max |x| over the block, so x ~= scale * q with scale = amax / 32767. The error is at
// most amax / 65534 per element, 2^-16 of the block's largest value: under bf16's rounding (2^-9
// of each value, what the AVX512_BF16 kernels do), and far under the goldens' tolerance. (int8
// activations, llama.cpp's choice, move the tiny-toolcaller logits by 0.11-0.27: over it.)
//
// Weights: each unit of 32 codes under one scale (a Q8_0/Q4_0/Q5_0/MXFP4 block (MXFP4 codes as
// twice their e2m1 value, integers), a Q4_K/Q5_K sub-block,
// two Q6_K sub-blocks with their int8 scales multiplied in, 32 elements of an MLX group) is widened
// to int16 in registers and multiplied pairwise with the activations into int32 lanes, exactly.
// Per unit and token, one float multiply-add:
//   acc = fma(d * sc * scale_x, float(int32 lanes), acc);   offsets += c * sum_x
// (c = -dmin * m for Q4_K/Q5_K, the group's bias for MLX), and the output is sum_lanes(acc) +
// offsets. Each (row, token) runs that same sequence for any number of tokens and any row range,
// so one token gives the bits of its row among many (chunked prefill == one-shot, batch
// invariance). Targets differ (the lane count sets how the int32 lanes are summed) in the last
// bits of the float sums only.
//
// Prefill on x86 runs token tiles, the same sums with tokens across the lanes: per tile, a row's
// codes are decoded once, and each pair of codes is broadcast against a vector of that pair of every
// token of the tile (VPMADDWD), so the per-unit float work (convert, scale, multiply-add) is shared
// by the tile's tokens instead of paid per token. Lane k of the one-token path (the int32 lane of
// each unit's products) becomes accumulator k of the tile, so every (row, token) still runs the
// same integer sums, the same float operations in the same order, and the same final tree
// (lane_tree_sum): the bits of a token never depend on which path or tile computed it.
//
// Stateless; callable from any thread. The activations are prepared by the caller (one buffer per
// call), then read by every worker.
#include <cstdint>
#include <vector>

#include "keel/ops/ggml_blocks.h"
#include "keel/ops/simd_kernels.h"

namespace keel::ops {

// Whether gemm_ggml_i16 has a kernel for this format (every ggml block format keel reads).
bool ggml_i16_supported(WeightFormat f);
// Whether gemm_mlx_i16 runs these rows (4 or 8 bits, groups a multiple of 32 that divide the row).
bool mlx_i16_supported(const MlxRows& w);

// Activations quantized per block of 32 (cols a multiple of 32). MLX 4-bit rows keep two codes per
// byte, element 2k in the low nibble and 2k + 1 in the high one; their activations are stored with
// each block's even elements first, then its odd ones (pairs_split), so that one nibble of 16
// consecutive bytes meets 16 consecutive activations.
// With kI16TileTokens or more tokens the same values are also kept in token tiles of that many
// (the last tile padded), for the token-tile products: pair P (elements 2P, 2P + 1 of q's order)
// of the tile's tokens side by side.
constexpr int64_t kI16TileTokens = 8;
struct I16Activations {
  std::vector<int16_t> q;    // [n_tokens][cols]
  std::vector<float> scale;  // [n_tokens][cols / 32]: x ~= scale * q
  std::vector<float> sum;    // [n_tokens][cols / 32]: scale * (sum of the block's q)
  std::vector<int16_t> tiled_q;    // [tiles][cols / 2][kI16TileTokens][2], or empty
  std::vector<float> tiled_scale;  // [tiles][cols / 32][kI16TileTokens], or empty
  std::vector<float> tiled_sum;    // [tiles][cols / 32][kI16TileTokens], or empty
  int64_t cols = 0;
  bool pairs_split = false;
};

// Sizes `a` for n_tokens tokens of `cols` (call once, on one thread).
void size_i16_activations(int64_t cols, int64_t n_tokens, bool pairs_split, I16Activations& a);
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
