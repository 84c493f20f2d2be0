#pragma once
// Linear layers over every weight format, spread across the thread pool by output rows.
#include <cstdint>

#include "keel/model/weights.h"
#include "keel/util/thread_pool.h"

namespace keel::ops {

// y[t][r] = sum_c W[r][c] * x[t][c] for t < n_tokens; x is [n_tokens][W.cols], y [n_tokens][W.rows].
// One token streams each weight row once through the fused per-format kernels; several tokens
// decode a few rows at a time to f32 in per-thread scratch and reuse them across all tokens, so no
// whole matrix is ever dequantized.
void matmul(const Matrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

// Writes row `row` of W as floats (embedding lookup).
void decode_row(const Matrix& w, int64_t row, float* out);

}  // namespace keel::ops
