#include "keel/ops/matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "keel/ops/bf16_dot_x86.h"
#include "keel/ops/ggml_blocks.h"
#include "keel/ops/ggml_bf16_x86.h"
#include "keel/ops/int16_dot.h"
#include "keel/ops/interleaved_rows.h"
#include "keel/ops/mlx_bf16_x86.h"
#include "keel/ops/mxfp4_bf16_x86.h"
#include "keel/ops/simd_kernels.h"
#include "keel/util/error.h"
#include "keel/util/half.h"

namespace keel::ops {
namespace {

// Rows per task: enough work to amortise scheduling, small enough to balance two to 64 threads.
constexpr int64_t kRowsPerTask = 16;
// Tokens per task when activations are prepared across the pool; up to this many in all are
// prepared by the calling thread alone.
constexpr int64_t kTokensPerTask = 8;

MlxRows mlx_rows(const Matrix& w) {
  return {reinterpret_cast<const uint32_t*>(w.data), w.scales.data(), w.biases.data(), w.bits(), w.group_size, w.cols};
}

Mxfp4Rows mxfp4_rows(const Matrix& w) { return {w.data, w.block_exponents, w.cols}; }

bool is_mlx(const Matrix& w) { return w.format == WeightFormat::MLX4 || w.format == WeightFormat::MLX8; }

// The kernel a product runs, first match on this CPU.
enum class Kernel {
  Bf16Dp,     // BF16 weights, AVX512_BF16: bf16 activations (bf16_dot_x86.h)
  Mxfp4Bf16,  // MXFP4 values are exact in bf16: widened rows through the same bf16 products
  MlxBf16,    // MLX codes times bf16 activations, scale and bias per group (mlx_bf16_x86.h)
  GgmlBf16,   // ggml block codes times bf16 activations, scales per (sub-)block (ggml_bf16_x86.h)
  I16,        // ggml blocks where that one does not run, and MLX on every other target: int16 activations per block of 32 (int16_dot.h)
  Mlx,        // MLX elsewhere: unpacked in registers, each unpacked vector shared by up to four tokens
  Gemv,       // one token, every other format
  GgmlF32,    // ggml blocks elsewhere: the task's rows widened to f32 once, reused for every token
  Rows,       // several tokens, dense weights: a block of rows widened to f32 once
};

Kernel kernel_for(const Matrix& w, int64_t n_tokens) {
  if (w.format == WeightFormat::BF16 && cpu_has_avx512_bf16()) return Kernel::Bf16Dp;
  if (w.format == WeightFormat::MXFP4 && mxfp4_bf16_supported()) return Kernel::Mxfp4Bf16;
  if (is_mlx(w) && mlx_bf16_supported(mlx_rows(w))) return Kernel::MlxBf16;
  if (is_ggml_block_format(w.format) && !w.interleaved && ggml_bf16_supported(w.format)) return Kernel::GgmlBf16;
  if (is_mlx(w) ? mlx_i16_supported(mlx_rows(w)) : is_ggml_block_format(w.format) && ggml_i16_supported(w.format))
    return Kernel::I16;
  if (is_mlx(w)) return Kernel::Mlx;
  if (n_tokens == 1) return Kernel::Gemv;
  if (is_ggml_block_format(w.format)) return Kernel::GgmlF32;
  return Kernel::Rows;
}

void gemv_range(const Matrix& w, const float* x, int64_t r0, int64_t r1, float* y) {
  switch (w.format) {
    case WeightFormat::F32: gemv_f32(reinterpret_cast<const float*>(w.data), w.cols, x, r0, r1, y); break;
    case WeightFormat::F16: gemv_f16(reinterpret_cast<const uint16_t*>(w.data), w.cols, x, r0, r1, y); break;
    case WeightFormat::BF16: gemv_bf16(reinterpret_cast<const uint16_t*>(w.data), w.cols, x, r0, r1, y); break;
    case WeightFormat::MLX4:
    case WeightFormat::MLX8: gemm_mlx(mlx_rows(w), x, 1, r0, r1, y, 0); break;
    case WeightFormat::MXFP4: gemv_mxfp4(mxfp4_rows(w), x, r0, r1, y); break;
    // ggml blocks, portable path: rows widened to their exact f32 values (ggml_blocks.h).
    case WeightFormat::Q8_0:
    case WeightFormat::Q4_0:
    case WeightFormat::Q5_0:
    case WeightFormat::Q4_K:
    case WeightFormat::Q5_K:
    case WeightFormat::Q6_K:
    case WeightFormat::MXFP4_GGUF: gemm_ggml_f32(ggml_rows(w), x, 1, r0, r1, y, 0); break;
    default: throw Error(w.name + ": no kernel for weight format " + weight_format_name(w.format));
  }
}

bool needs_activations(Kernel k) {
  return k == Kernel::Bf16Dp || k == Kernel::Mxfp4Bf16 || k == Kernel::MlxBf16 || k == Kernel::GgmlBf16 ||
         k == Kernel::I16;
}

// A product's activations in the form its kernel reads (one member used, by kernel).
struct Activations {
  std::vector<uint16_t> bf16;  // Bf16Dp, Mxfp4Bf16: x rounded to bf16, [n_tokens][cols]
  MlxBf16Activations mlx_bf16;
  GgmlBf16Activations ggml_bf16;
  I16Activations i16;
};

// One product of a batch, as the kernels see it.
struct Product {
  const MatmulJob* job;
  Kernel kernel;
  Activations* act;    // its own, or an earlier product's with the same input and form
  bool prepares;       // whether this product fills `act`
  size_t first_task;   // its row tasks are [first_task, first_task + tasks) of the batch
};

// Whether products a and b read the same activations: the same input, and a form that depends
// only on what both share.
bool same_activations(const Product& a, const Product& b) {
  const Matrix &wa = *a.job->w, &wb = *b.job->w;
  return a.kernel == b.kernel && a.job->x == b.job->x && a.job->n_tokens == b.job->n_tokens && wa.cols == wb.cols &&
         wa.format == wb.format && wa.group_size == wb.group_size;
}

void size_activations(const Product& p) {
  const Matrix& w = *p.job->w;
  const int64_t n = p.job->n_tokens;
  Activations& a = *p.act;
  switch (p.kernel) {
    case Kernel::Bf16Dp:
    case Kernel::Mxfp4Bf16: a.bf16.resize(static_cast<size_t>(n * w.cols)); break;
    case Kernel::MlxBf16: size_mlx_bf16_activations(mlx_rows(w), n, a.mlx_bf16); break;
    case Kernel::GgmlBf16: size_ggml_bf16_activations(ggml_rows(w), n, a.ggml_bf16); break;
    case Kernel::I16:
      size_i16_activations(w.cols, n, w.format == WeightFormat::MLX4, a.i16, i16_activation_limit(w.format));
      break;
    default: break;
  }
}

// Tokens [t0, t1) of the product's activations; disjoint ranges may run on different threads.
void prepare_activations(const Product& p, int64_t t0, int64_t t1) {
  const Matrix& w = *p.job->w;
  const float* x = p.job->x;
  Activations& a = *p.act;
  switch (p.kernel) {
    case Kernel::Bf16Dp:
    case Kernel::Mxfp4Bf16:
      for (int64_t i = t0 * w.cols; i < t1 * w.cols; ++i) a.bf16[static_cast<size_t>(i)] = float_to_bf16(x[i]);
      break;
    case Kernel::MlxBf16: prepare_mlx_bf16_activations(mlx_rows(w), x, t0, t1, a.mlx_bf16); break;
    case Kernel::GgmlBf16: prepare_ggml_bf16_activations(ggml_rows(w), x, t0, t1, a.ggml_bf16); break;
    case Kernel::I16: quantize_i16_activations(x, t0, t1, a.i16); break;
    default: break;
  }
}

// Rows [r0, r1) of the product, every token.
void multiply(const Product& p, int64_t r0, int64_t r1) {
  const Matrix& w = *p.job->w;
  const float* x = p.job->x;
  const int64_t n = p.job->n_tokens;
  float* y = p.job->y;
  const Activations* a = p.act;  // null for the kernels that read x as it is
  switch (p.kernel) {
    case Kernel::Bf16Dp:
      gemm_bf16_dp(reinterpret_cast<const uint16_t*>(w.data), w.cols, r0, r1, a->bf16.data(), n, y, w.rows);
      return;
    case Kernel::Mxfp4Bf16: gemm_mxfp4_bf16(mxfp4_rows(w), a->bf16.data(), n, r0, r1, y + r0, w.rows); return;
    case Kernel::MlxBf16: gemm_mlx_bf16(mlx_rows(w), a->mlx_bf16, n, r0, r1, y + r0, w.rows); return;
    case Kernel::GgmlBf16: gemm_ggml_bf16(ggml_rows(w), a->ggml_bf16, n, r0, r1, y + r0, w.rows); return;
    case Kernel::I16:
      if (is_mlx(w)) gemm_mlx_i16(mlx_rows(w), a->i16, n, r0, r1, y + r0, w.rows);
      else gemm_ggml_i16(ggml_rows(w), a->i16, n, r0, r1, y + r0, w.rows);
      return;
    case Kernel::Mlx: gemm_mlx(mlx_rows(w), x, n, r0, r1, y + r0, w.rows); return;
    case Kernel::Gemv: gemv_range(w, x, r0, r1, y + r0); return;
    case Kernel::GgmlF32: gemm_ggml_f32(ggml_rows(w), x, n, r0, r1, y + r0, w.rows); return;
    case Kernel::Rows: break;
  }
  // Widen the task's rows to f32 once (in this thread's scratch), then reuse them for every token.
  const float* rows;
  thread_local std::vector<float> scratch;
  if (w.format == WeightFormat::F32) {
    rows = reinterpret_cast<const float*>(w.data) + r0 * w.cols;
  } else {
    scratch.resize(static_cast<size_t>(kRowsPerTask * w.cols));
    for (int64_t r = r0; r < r1; ++r) decode_row(w, r, scratch.data() + (r - r0) * w.cols);
    rows = scratch.data();
  }
  // Token blocks outermost: a block's activations stay near the core while the task's rows pass by.
  for (int64_t t0 = 0; t0 < n; t0 += kGemmRowsTokenBlock) {
    const int64_t nt = std::min<int64_t>(kGemmRowsTokenBlock, n - t0);
    for (int64_t r = r0; r < r1; r += 4) {
      const int nr = static_cast<int>(std::min<int64_t>(4, r1 - r));
      gemm_rows_f32(rows + (r - r0) * w.cols, nr, x + t0 * w.cols, nt, w.cols, y + t0 * w.rows + r, w.rows);
    }
  }
}

}  // namespace

bool interleave_for_kernels(Matrix& w) {
  if (w.interleaved || w.rows == 0 || w.rows % kInterleavedRows != 0 || !is_ggml_block_format(w.format)) return false;
  if (kernel_for(w, 1) != Kernel::I16 || !i16_reads_interleaved_rows(w.format)) return false;
  const size_t group_bytes = kInterleavedRows * w.row_bytes(), bytes = group_bytes * static_cast<size_t>(w.rows / kInterleavedRows);
  std::vector<uint8_t> groups(bytes);
  for (size_t at = 0; at < bytes; at += group_bytes) interleave_ggml_group(w.format, w.data + at, w.cols, groups.data() + at);
  w.realigned = std::move(groups);
  w.data = w.realigned.data();
  w.interleaved = true;
  return true;
}

void decode_row(const Matrix& w, int64_t row, float* out) {
  const uint8_t* base = w.data + static_cast<size_t>(row) * w.row_bytes();
  switch (w.format) {
    case WeightFormat::F32:
      std::memcpy(out, base, static_cast<size_t>(w.cols) * 4);
      return;
    case WeightFormat::F16:
    case WeightFormat::BF16: {
      const uint16_t* p = reinterpret_cast<const uint16_t*>(base);
      if (w.format == WeightFormat::F16)
        for (int64_t c = 0; c < w.cols; ++c) out[c] = f16_to_float(p[c]);
      else
        for (int64_t c = 0; c < w.cols; ++c) out[c] = bf16_to_float(p[c]);
      return;
    }
    case WeightFormat::MLX4:
    case WeightFormat::MLX8: {
      const int bits = w.bits();
      const int per_word = 32 / bits;
      const uint32_t mask = (1u << bits) - 1u;
      const uint32_t* words = reinterpret_cast<const uint32_t*>(base);
      const int64_t groups = w.cols / w.group_size;
      const float* scales = w.scales.data() + row * groups;
      const float* biases = w.biases.data() + row * groups;
      for (int64_t c = 0; c < w.cols; ++c) {
        uint32_t q = (words[c / per_word] >> ((c % per_word) * bits)) & mask;
        int64_t g = c / w.group_size;
        out[c] = scales[g] * static_cast<float>(q) + biases[g];
      }
      return;
    }
    case WeightFormat::MXFP4:
      decode_mxfp4_rows(mxfp4_rows(w), row, row + 1, out);
      return;
    case WeightFormat::Q8_0:
    case WeightFormat::Q4_0:
    case WeightFormat::Q5_0:
    case WeightFormat::Q4_K:
    case WeightFormat::Q5_K:
    case WeightFormat::Q6_K:
    case WeightFormat::MXFP4_GGUF:
      decode_ggml_row(ggml_rows(w), row, out);
      return;
    default: throw Error(w.name + ": no kernel for weight format " + weight_format_name(w.format));
  }
}

void matmul_batch(std::span<const MatmulJob> jobs, ThreadPool& pool) {
  // The calling thread's activation buffers, one per product at most, kept between calls (a
  // lambda naming a thread_local would get its worker's own: the tasks see them through products).
  thread_local std::vector<Activations> caller_buffers;
  thread_local std::vector<Product> caller_products;
  std::vector<Activations>& buffers = caller_buffers;
  std::vector<Product>& products = caller_products;
  if (buffers.size() < jobs.size()) buffers.resize(jobs.size());

  products.clear();
  size_t tasks = 0, buffers_used = 0;
  int64_t tokens_to_prepare = 0;
  for (const MatmulJob& job : jobs) {
    if (job.n_tokens <= 0 || job.w->rows == 0) continue;
    Product p{&job, kernel_for(*job.w, job.n_tokens), nullptr, false, tasks};
    if (needs_activations(p.kernel)) {
      for (const Product& q : products)
        if (q.prepares && same_activations(q, p)) {
          p.act = q.act;
          break;
        }
      if (!p.act) {
        p.act = &buffers[buffers_used++];
        p.prepares = true;
        size_activations(p);
        tokens_to_prepare += job.n_tokens;
      }
    }
    tasks += static_cast<size_t>((job.w->rows + kRowsPerTask - 1) / kRowsPerTask);
    products.push_back(p);
  }

  // The activations: by the calling thread when few, else by blocks of tokens across the pool.
  if (tokens_to_prepare <= kTokensPerTask) {
    for (const Product& p : products)
      if (p.prepares) prepare_activations(p, 0, p.job->n_tokens);
  } else {
    thread_local std::vector<std::pair<const Product*, int64_t>> caller_blocks;  // (product, first token)
    auto& blocks = caller_blocks;
    blocks.clear();
    for (const Product& p : products)
      if (p.prepares)
        for (int64_t t0 = 0; t0 < p.job->n_tokens; t0 += kTokensPerTask) blocks.emplace_back(&p, t0);
    pool.parallel_for(blocks.size(), [&](size_t i, int) {
      const auto [p, t0] = blocks[i];
      prepare_activations(*p, t0, std::min(p->job->n_tokens, t0 + kTokensPerTask));
    });
  }

  // Every product's row tasks in one loop: consecutive tasks are consecutive rows of a matrix.
  pool.parallel_for(tasks, [&](size_t task, int) {
    const Product& p = *(std::upper_bound(products.begin(), products.end(), task,
                                          [](size_t t, const Product& q) { return t < q.first_task; }) - 1);
    const int64_t r0 = static_cast<int64_t>(task - p.first_task) * kRowsPerTask;
    multiply(p, r0, std::min(p.job->w->rows, r0 + kRowsPerTask));
  });
}

void matmul(const Matrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  const MatmulJob job{&w, x, n_tokens, y};
  matmul_batch({&job, 1}, pool);
}

}  // namespace keel::ops
