#pragma once
// ggml block rows interleaved in groups of 8: a layout keel makes at load (matmul.h,
// interleave_for_kernels) for the int16 kernels' row groups (int16_dot.h). Rows across the lanes
// of a vector, a decode step loads a pair of codes of 8 rows at once and runs each unit's float
// work once for the 8 rows, where a row at a time spent a horizontal sum and the float work on
// every row's every unit. (llama.cpp repacks Q4_0 rows 8 at a time for its AVX2 kernels too.)
// The bytes are the file's; only their order changes, so the values and every product's bits are
// the same as from the rows as stored.
//
// Group g (rows 8g .. 8g + 8) takes the bytes of its 8 rows, from where row 8g starts. For each
// block column b, in order: the 8 rows' block headers (the bytes before the codes: Q4_0's f16 d,
// MXFP4's e8m0 exponent), row 0 first; then the 8 rows' code bytes in chunks of 2: chunk 0 of rows
// 0..7, chunk 1 of rows 0..7, ... A Q4_0 block column is 16 bytes of scales and 8 x 16 bytes of
// codes, 16 bytes holding the code bytes 2c and 2c + 1 of every row: their low nibbles are
// elements 2c and 2c + 1, their high nibbles 2c + 16 and 2c + 17. A Q8_0 column's 16 bytes c are code bytes 2c, 2c + 1 of each
// row (elements 2c, 2c + 1). Q5_0, Q4_K, Q5_K and Q6_K keep no header apart: all bytes of their blocks go
// in chunks of 2, d, qh, dmin and the scale bytes too, so that each is one load for the 8 rows.
//
// Pure functions: any thread.
#include <cstdint>

#include "keel/model/weights.h"

namespace keel::ops {

inline constexpr int kInterleavedRows = 8;

// The formats whose kernels read interleaved rows (Q4_0, Q5_0, MXFP4_GGUF, Q8_0, Q4_K, Q5_K, Q6_K).
bool ggml_interleavable(WeightFormat f);

// The 8 rows at `rows` (row_bytes apart, cols each) as one group at `out` (8 x row_bytes bytes).
void interleave_ggml_group(WeightFormat f, const uint8_t* rows, int64_t cols, uint8_t* out);

// Block b of row `lane` of the group at `group`, as the file stored it (block bytes into `out`).
void deinterleave_ggml_block(WeightFormat f, const uint8_t* group, int64_t b, int64_t lane, uint8_t* out);

// Row r of interleaved rows (`data`: groups of 8 rows of row_bytes), as the file stored it:
// cols / block elements blocks into `out` (row_bytes bytes).
void deinterleave_ggml_row(WeightFormat f, const uint8_t* data, int64_t cols, int64_t r, uint8_t* out);

}  // namespace keel::ops
