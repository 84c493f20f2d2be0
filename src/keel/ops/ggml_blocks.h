#pragma once
// The ggml block weight formats of GGUF files (WeightFormat::Q8_0 .. MXFP4_GGUF): how a block is
// laid out and its exact dequantization, the values ggml's dequantize_row_* and gguf-py's
// dequantize give (f16 scales widened exactly, d * sc formed in f32 before it multiplies the code,
// as ggml does). This is the portable path: decode_row, and matmul where no faster kernel runs
// (each row widened to f32, then the f32 products), and the reference the SIMD kernels
// (ggml_bf16_x86.h) are tested against. Pure functions: any thread.
//
// Layouts (QK_K = 256; little-endian; f16 = IEEE half), bytes per block / elements:
//   Q8_0       34 / 32   f16 d; int8 qs[32]                       x = d * q
//   Q4_0       18 / 32   f16 d; u8 qs[16]                         x[j] = d * (lo(qs[j]) - 8), x[j+16] = hi
//   Q5_0       22 / 32   f16 d; u32 qh; u8 qs[16]                 as Q4_0 with bit j (j+16) of qh as bit 4, - 16
//   Q4_K      144 / 256  f16 d, dmin; u8 scales[12]; u8 qs[128]   8 x 32: x = (d * sc) * q - dmin * m
//   Q5_K      176 / 256  as Q4_K with u8 qh[32] before qs: bit 2i / 2i+1 of qh[l] is bit 4 of chunk i's halves
//   Q6_K      210 / 256  u8 ql[128]; u8 qh[64]; int8 scales[16]; f16 d   16 x 16: x = (d * sc) * (q - 32)
//   MXFP4_GGUF 17 / 32   u8 e (e8m0); u8 qs[16]                   x[j] = e2m1(lo(qs[j])) * 2^(e-127), x[j+16] = hi
#include <cstdint>

#include "keel/model/weights.h"

namespace keel::ops {

// The rows of a matrix in a ggml block format: row r's blocks start at data + r * row_bytes, or,
// interleaved, rows in groups of 8 from data + (r - r % 8) * row_bytes (interleaved_rows.h).
struct GgmlRows {
  WeightFormat format;
  const uint8_t* data;
  int64_t cols;       // a multiple of the format's block elements
  int64_t row_bytes;  // (cols / block elements) * block bytes
  bool interleaved = false;
};

inline GgmlRows ggml_rows(const Matrix& w) {
  return {w.format, w.data, w.cols, static_cast<int64_t>(w.row_bytes()), w.interleaved};
}

// out[0 .. cols) = the values of the `cols / block elements` blocks at `blocks` (one row).
void decode_ggml_blocks(WeightFormat f, const uint8_t* blocks, int64_t cols, float* out);
// out[0 .. cols) = the values of row r, interleaved or not.
void decode_ggml_row(const GgmlRows& w, int64_t r, float* out);

// The portable product: y[t * y_stride + (r - r0)] = dot(row r, x[t]) for r in [r0, r1) (a matmul
// task's rows; the scratch holds them all), t < n_tokens, x f32 ([n_tokens][cols]). The rows are widened to their
// exact f32 values in per-thread scratch and multiplied in f32 (gemv_f32 for one token,
// gemm_rows_f32 for several, which sum alike), so one token gives the bits of its row among many.
void gemm_ggml_f32(const GgmlRows& w, const float* x, int64_t n_tokens, int64_t r0, int64_t r1, float* y,
                   int64_t y_stride);

// Sub-block j (0..7) of a Q4_K/Q5_K block: its 6-bit scale and 6-bit min from scales[12]
// (ggml's get_scale_min_k4).
inline void ggml_k4_scale_min(int j, const uint8_t* s, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Twice the e2m1 value of each MXFP4 code, as ggml keeps them (kvalues_mxfp4); the block scale
// is then 2^(e - 128), ggml_e8m0_to_fp32_half.
inline constexpr int8_t kGgmlTwiceE2m1[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
// The bits of 2^(e - 128) as a float (e = 0 and 1 are subnormal, e = 255 is 2^127).
inline uint32_t ggml_e8m0_half_bits(uint8_t e) { return e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23; }

}  // namespace keel::ops
