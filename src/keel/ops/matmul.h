#pragma once
// Linear layers over every weight format, spread across the thread pool by output rows.
#include <cstdint>

#include "keel/model/weights.h"
#include "keel/util/thread_pool.h"

namespace keel::ops {

// y[t][r] = sum_c W[r][c] * x[t][c] for t < n_tokens; x is [n_tokens][W.cols], y [n_tokens][W.rows].
// No whole matrix is ever converted: rows are read in their stored format (or a block of rows is
// widened to f32 in per-thread scratch and reused for all tokens). Each output is summed in the
// same order whatever n_tokens is, so results never depend on how a prompt was chunked.
void matmul(const Matrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

// Writes row `row` of W as floats (embedding lookup).
void decode_row(const Matrix& w, int64_t row, float* out);

}  // namespace keel::ops
