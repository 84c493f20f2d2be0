#include "keel/ops/matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "keel/ops/bf16_dot_x86.h"
#include "keel/ops/ggml_blocks.h"
#include "keel/ops/ggml_bf16_x86.h"
#include "keel/ops/int16_dot.h"
#include "keel/ops/mlx_bf16_x86.h"
#include "keel/ops/mxfp4_bf16_x86.h"
#include "keel/ops/simd_kernels.h"
#include "keel/util/error.h"
#include "keel/util/half.h"

namespace keel::ops {
namespace {

// Rows per task: enough work to amortise scheduling, small enough to balance two to 64 threads.
constexpr int64_t kRowsPerTask = 16;

MlxRows mlx_rows(const Matrix& w) {
  return {reinterpret_cast<const uint32_t*>(w.data), w.scales.data(), w.biases.data(), w.bits(), w.group_size, w.cols};
}

Mxfp4Rows mxfp4_rows(const Matrix& w) { return {w.data, w.block_exponents, w.cols}; }

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

// x rounded to bf16 in a buffer of the calling thread (workers only read it); valid until its next call.
const uint16_t* activations_bf16(const float* x, int64_t count) {
  thread_local std::vector<uint16_t> x_bf16;
  x_bf16.resize(static_cast<size_t>(count));
  for (size_t i = 0; i < x_bf16.size(); ++i) x_bf16[i] = float_to_bf16(x[i]);
  return x_bf16.data();
}

// The packed-code kernels' two phases: the activations prepared in the calling thread's buffer,
// by blocks of tokens across the pool (inline when few), then each task's rows multiplied (the
// workers only read the buffer).
template <typename Prepare, typename Multiply>
void prepared_product(ThreadPool& pool, int64_t n_tokens, size_t tasks, Prepare prepare, Multiply multiply) {
  constexpr int64_t kTokensPerTask = 8;
  if (n_tokens <= kTokensPerTask) {
    prepare(0, n_tokens);
  } else {
    pool.parallel_for(static_cast<size_t>((n_tokens + kTokensPerTask - 1) / kTokensPerTask), [&](size_t task, int) {
      const int64_t t0 = static_cast<int64_t>(task) * kTokensPerTask;
      prepare(t0, std::min(n_tokens, t0 + kTokensPerTask));
    });
  }
  pool.parallel_for(tasks, [&](size_t task, int) { multiply(task); });
}

}  // namespace

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
      decode_ggml_blocks(w.format, base, w.cols, out);
      return;
    default: throw Error(w.name + ": no kernel for weight format " + weight_format_name(w.format));
  }
}

void matmul(const Matrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  const size_t tasks = static_cast<size_t>((w.rows + kRowsPerTask - 1) / kRowsPerTask);
  auto rows_of = [&](size_t task) {
    const int64_t r0 = static_cast<int64_t>(task) * kRowsPerTask;
    return std::pair{r0, std::min(w.rows, r0 + kRowsPerTask)};
  };

  if (w.format == WeightFormat::BF16 && cpu_has_avx512_bf16()) {
    const uint16_t* xb = activations_bf16(x, n_tokens * w.cols);
    pool.parallel_for(tasks, [&](size_t task, int) {
      auto [r0, r1] = rows_of(task);
      gemm_bf16_dp(reinterpret_cast<const uint16_t*>(w.data), w.cols, r0, r1, xb, n_tokens, y, w.rows);
    });
    return;
  }

  // MXFP4 values are exact in bf16: widened rows through the same bf16 products (mxfp4_bf16_x86.h).
  if (w.format == WeightFormat::MXFP4 && mxfp4_bf16_supported()) {
    const uint16_t* xb = activations_bf16(x, n_tokens * w.cols);
    pool.parallel_for(tasks, [&](size_t task, int) {
      auto [r0, r1] = rows_of(task);
      gemm_mxfp4_bf16(mxfp4_rows(w), xb, n_tokens, r0, r1, y + r0, w.rows);
    });
    return;
  }

  // MLX weights with AVX512_BF16: raw codes times bf16 activations, scale and bias per group
  // (mlx_bf16_x86.h).
  if ((w.format == WeightFormat::MLX4 || w.format == WeightFormat::MLX8) && mlx_bf16_supported(mlx_rows(w))) {
    const MlxRows m = mlx_rows(w);
    thread_local MlxBf16Activations caller_act;
    MlxBf16Activations& act = caller_act;  // a lambda naming the thread_local would get its worker's own
    size_mlx_bf16_activations(m, n_tokens, act);
    prepared_product(
        pool, n_tokens, tasks, [&](int64_t t0, int64_t t1) { prepare_mlx_bf16_activations(m, x, t0, t1, act); },
        [&](size_t task) {
          auto [r0, r1] = rows_of(task);
          gemm_mlx_bf16(m, act, n_tokens, r0, r1, y + r0, w.rows);
        });
    return;
  }

  // ggml block formats with AVX512_BF16: raw codes times bf16 activations, scales per block or
  // sub-block (ggml_bf16_x86.h).
  if (is_ggml_block_format(w.format) && ggml_bf16_supported(w.format)) {
    const GgmlRows g = ggml_rows(w);
    thread_local GgmlBf16Activations caller_act;
    GgmlBf16Activations& act = caller_act;
    size_ggml_bf16_activations(g, n_tokens, act);
    prepared_product(
        pool, n_tokens, tasks, [&](int64_t t0, int64_t t1) { prepare_ggml_bf16_activations(g, x, t0, t1, act); },
        [&](size_t task) {
          auto [r0, r1] = rows_of(task);
          gemm_ggml_bf16(g, act, n_tokens, r0, r1, y + r0, w.rows);
        });
    return;
  }

  // ggml block formats and MLX weights on every other target: integer products of the raw codes
  // with the activations quantized to int16 per block of 32 (int16_dot.h).
  const bool mlx = w.format == WeightFormat::MLX4 || w.format == WeightFormat::MLX8;
  if (mlx ? mlx_i16_supported(mlx_rows(w)) : is_ggml_block_format(w.format) && ggml_i16_supported(w.format)) {
    thread_local I16Activations caller_act;
    I16Activations& act = caller_act;
    size_i16_activations(w.cols, n_tokens, w.format == WeightFormat::MLX4, act, i16_activation_limit(w.format));
    prepared_product(
        pool, n_tokens, tasks, [&](int64_t t0, int64_t t1) { quantize_i16_activations(x, t0, t1, act); },
        [&](size_t task) {
          auto [r0, r1] = rows_of(task);
          if (mlx) gemm_mlx_i16(mlx_rows(w), act, n_tokens, r0, r1, y + r0, w.rows);
          else gemm_ggml_i16(ggml_rows(w), act, n_tokens, r0, r1, y + r0, w.rows);
        });
    return;
  }

  // MLX weights elsewhere: unpacked in registers, each unpacked vector shared by up to four tokens.
  if (w.format == WeightFormat::MLX4 || w.format == WeightFormat::MLX8) {
    pool.parallel_for(tasks, [&](size_t task, int) {
      auto [r0, r1] = rows_of(task);
      gemm_mlx(mlx_rows(w), x, n_tokens, r0, r1, y + r0, w.rows);
    });
    return;
  }

  if (n_tokens == 1) {
    pool.parallel_for(tasks, [&](size_t task, int) {
      auto [r0, r1] = rows_of(task);
      gemv_range(w, x, r0, r1, y + r0);
    });
    return;
  }

  // ggml blocks elsewhere: the task's rows widened to f32 once, reused for every token.
  if (is_ggml_block_format(w.format)) {
    pool.parallel_for(tasks, [&](size_t task, int) {
      auto [r0, r1] = rows_of(task);
      gemm_ggml_f32(ggml_rows(w), x, n_tokens, r0, r1, y + r0, w.rows);
    });
    return;
  }

  // Several tokens, dense weights: widen a block of rows to f32 once, reuse it for every token.
  pool.parallel_for(tasks, [&](size_t task, int) {
    auto [r0, r1] = rows_of(task);
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
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kGemmRowsTokenBlock) {
      const int64_t nt = std::min<int64_t>(kGemmRowsTokenBlock, n_tokens - t0);
      for (int64_t r = r0; r < r1; r += 4) {
        const int nr = static_cast<int>(std::min<int64_t>(4, r1 - r));
        gemm_rows_f32(rows + (r - r0) * w.cols, nr, x + t0 * w.cols, nt, w.cols, y + t0 * w.rows + r, w.rows);
      }
    }
  });
}

}  // namespace keel::ops
