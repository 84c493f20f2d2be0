#pragma once
// The innermost loops, compiled once per SIMD target (AVX-512, AVX2+FMA, SSE4, NEON/SVE on ARM,
// scalar emulation) by Google Highway and chosen at run time for the CPU at hand.
// Higher-level code (matmul.h) splits work across threads and calls these.
#include <cstddef>
#include <cstdint>

namespace keel::ops {

// y[r - r0] = dot(row r of W, x) for r in [r0, r1); W is row-major with `cols` elements per row.
void gemv_f32(const float* w, int64_t cols, const float* x, int64_t r0, int64_t r1, float* y);
void gemv_f16(const uint16_t* w, int64_t cols, const float* x, int64_t r0, int64_t r1, float* y);
void gemv_bf16(const uint16_t* w, int64_t cols, const float* x, int64_t r0, int64_t r1, float* y);

// MLX affine-quantized rows: `bits` 4 or 8, element j of a row in bits [j*bits, (j+1)*bits) of
// its U32 words; value = scales[g] * q + biases[g] for group g = j / group_size.
struct MlxRows {
  const uint32_t* words;
  const float* scales;
  const float* biases;
  int bits;
  int group_size;
  int64_t cols;
};
// y[t * y_stride + (r - r0)] = dot(row r, x[t]) for r in [r0, r1), t < n_tokens (x rows `cols` apart).
void gemm_mlx(const MlxRows& w, const float* x, int64_t n_tokens, int64_t r0, int64_t r1, float* y, int64_t y_stride);

// MXFP4 rows (OCP microscaling, gpt-oss experts): per 32 elements, 16 bytes of e2m1 codes (low
// nibble first) and one e8m0 exponent e scaling the block by 2^(e - 127).
struct Mxfp4Rows {
  const uint8_t* codes;      // [rows][cols / 2]
  const uint8_t* exponents;  // [rows][cols / 32]
  int64_t cols;              // a multiple of 32
};
// out[(r - r0) * cols + c] = element c of row r, for r in [r0, r1): the exact values, so a
// product over widened rows sums the same floats however the rows were widened.
void decode_mxfp4_rows(const Mxfp4Rows& w, int64_t r0, int64_t r1, float* out);
// y[r - r0] = dot(row r, x), bit for bit what gemv_f32 gives over the rows decode_mxfp4_rows
// widens (and so what gemm_rows_f32 gives for any number of tokens), without widening them.
void gemv_mxfp4(const Mxfp4Rows& w, const float* x, int64_t r0, int64_t r1, float* y);

// Tokens per call of gemm_rows_f32 that fill its register tiles on every target (3 tokens a tile
// on 16-register targets, 4 on 32-register ones).
inline constexpr int64_t kGemmRowsTokenBlock = 12;

// Multi-token product for a small block of f32 rows: y[t * y_stride + r] = dot(rows[r], x[t]) for
// r < n_rows (at most 4, each `cols` long, contiguous) and t < n_tokens (x rows `cols` apart).
void gemm_rows_f32(const float* rows, int n_rows, const float* x, int64_t n_tokens, int64_t cols,
                   float* y, int64_t y_stride);

// The name of the SIMD target the dispatcher picked on this CPU (for logs and bench reports).
const char* simd_target_name();

// Runs `iterations` rounds of independent FMAs at full vector width; returns the flops done.
double fma_burst(int64_t iterations, float* sink);

}  // namespace keel::ops
