#pragma once
// Linear layers over every weight format, spread across the thread pool by output rows.
#include <cstdint>
#include <span>

#include "keel/model/weights.h"
#include "keel/util/thread_pool.h"

namespace keel::ops {

// y[t][r] = sum_c W[r][c] * x[t][c] for t < n_tokens; x is [n_tokens][W.cols], y [n_tokens][W.rows].
// No whole matrix is ever converted: rows are read in their stored format (or a block of rows is
// widened to f32 in per-thread scratch and reused for all tokens). Each output is summed in the
// same order whatever n_tokens is, so results never depend on how a prompt was chunked.
void matmul(const Matrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

// One product of a batch: y = matmul(w, x) over n_tokens.
struct MatmulJob {
  const Matrix* w;
  const float* x;  // [n_tokens][w->cols]
  int64_t n_tokens;
  float* y;        // [n_tokens][w->rows], written by this job alone
};

// Runs the jobs as one loop of the pool, with the same bits as calling matmul on each: jobs that
// read the same input in the same form (the same x, format and shape: gate and up, q k and v, the
// experts chosen for a token) prepare it once, and every job's rows are shared among the threads
// together. A decode step's matrices are tens of microseconds each, so a loop per matrix would
// spend a good part of the step starting and ending loops. No job's y may be another's x.
void matmul_batch(std::span<const MatmulJob> jobs, ThreadPool& pool);

// At load, on one thread: a matrix whose rows this CPU's kernels read faster interleaved
// (ops/interleaved_rows.h: every ggml block format that the x86 int16 kernels run) is
// repacked into memory it owns; returns whether it was (its old bytes are then the caller's to
// release). Which matrices are depends on the CPU and KEEL_SIMD_TARGET; every product gives the
// same bits either way.
bool interleave_for_kernels(Matrix& w);

// Writes row `row` of W as floats (embedding lookup).
void decode_row(const Matrix& w, int64_t row, float* out);

}  // namespace keel::ops
