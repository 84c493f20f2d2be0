#include "keel/ops/ggml_blocks.h"

#include <bit>
#include <algorithm>
#include <cstring>
#include <vector>

#include "keel/ops/interleaved_rows.h"
#include "keel/ops/simd_kernels.h"
#include "keel/util/error.h"
#include "keel/util/half.h"

namespace keel::ops {
namespace {

float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_float(h);
}

// Each function writes one block's elements. Products are f32, in ggml's order.

void q8_0(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

void q4_0(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((qs[j] & 15) - 8) * d;
    y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

void q5_0(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  uint32_t h;
  std::memcpy(&h, b + 2, 4);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    const int hi0 = static_cast<int>((h >> j) & 1) << 4, hi1 = static_cast<int>((h >> (j + 16)) & 1) << 4;
    y[j] = static_cast<float>(((qs[j] & 15) | hi0) - 16) * d;
    y[j + 16] = static_cast<float>(((qs[j] >> 4) | hi1) - 16) * d;
  }
}

// Q4_K and Q5_K (qh null for Q4_K).
void qk_4_5(const uint8_t* b, const uint8_t* qh, const uint8_t* qs, float* y) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  const uint8_t* scales = b + 4;
  for (int i = 0; i < 4; ++i) {
    for (int half = 0; half < 2; ++half) {
      int sc, m;
      ggml_k4_scale_min(2 * i + half, scales, sc, m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) {
        int q = half ? qs[32 * i + l] >> 4 : qs[32 * i + l] & 15;
        if (qh) q += ((qh[l] >> (2 * i + half)) & 1) << 4;
        y[64 * i + 32 * half + l] = d1 * static_cast<float>(q) - m1;
      }
    }
  }
}

void q6_k(const uint8_t* b, float* y) {
  const float d = f16_at(b + 208);
  for (int n = 0; n < 2; ++n) {
    const uint8_t* ql = b + 64 * n;
    const uint8_t* qh = b + 128 + 32 * n;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192 + 8 * n);
    float* o = y + 128 * n;
    for (int l = 0; l < 32; ++l) {
      const int q1 = ((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      const int is = l / 16;
      o[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
      o[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      o[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      o[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
  }
}

void mxfp4(const uint8_t* b, float* y) {
  const float d = std::bit_cast<float>(ggml_e8m0_half_bits(b[0]));
  const uint8_t* qs = b + 1;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(kGgmlTwiceE2m1[qs[j] & 15]) * d;
    y[j + 16] = static_cast<float>(kGgmlTwiceE2m1[qs[j] >> 4]) * d;
  }
}

}  // namespace

void decode_ggml_blocks(WeightFormat f, const uint8_t* blocks, int64_t cols, float* out) {
  const GgmlBlock blk = ggml_block_size(f);
  if (!is_ggml_block_format(f) || blk.elements <= 0)
    throw Error(std::string("decode_ggml_blocks: not a ggml block format: ") + weight_format_name(f));
  const int64_t n = cols / blk.elements;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* b = blocks + i * blk.bytes;
    float* y = out + i * blk.elements;
    switch (f) {
      case WeightFormat::Q8_0: q8_0(b, y); break;
      case WeightFormat::Q4_0: q4_0(b, y); break;
      case WeightFormat::Q5_0: q5_0(b, y); break;
      case WeightFormat::Q4_K: qk_4_5(b, nullptr, b + 16, y); break;
      case WeightFormat::Q5_K: qk_4_5(b, b + 16, b + 48, y); break;
      case WeightFormat::Q6_K: q6_k(b, y); break;
      case WeightFormat::MXFP4_GGUF: mxfp4(b, y); break;
      default: break;
    }
  }
}

void decode_ggml_row(const GgmlRows& w, int64_t r, float* out) {
  if (!w.interleaved) return decode_ggml_blocks(w.format, w.data + r * w.row_bytes, w.cols, out);
  thread_local std::vector<uint8_t> row;
  row.resize(static_cast<size_t>(w.row_bytes));
  deinterleave_ggml_row(w.format, w.data, w.cols, r, row.data());
  decode_ggml_blocks(w.format, row.data(), w.cols, out);
}

void gemm_ggml_f32(const GgmlRows& w, const float* x, int64_t n_tokens, int64_t r0, int64_t r1, float* y,
                   int64_t y_stride) {
  thread_local std::vector<float> rows;
  rows.resize(static_cast<size_t>((r1 - r0) * w.cols));
  for (int64_t r = r0; r < r1; ++r) decode_ggml_row(w, r, rows.data() + (r - r0) * w.cols);
  if (n_tokens == 1) {
    gemv_f32(rows.data(), w.cols, x, 0, r1 - r0, y);
    return;
  }
  // Token blocks outermost: a block's activations stay near the core while the rows pass by.
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kGemmRowsTokenBlock) {
    const int64_t nt = std::min<int64_t>(kGemmRowsTokenBlock, n_tokens - t0);
    for (int64_t r = r0; r < r1; r += 4) {
      const int nr = static_cast<int>(std::min<int64_t>(4, r1 - r));
      gemm_rows_f32(rows.data() + (r - r0) * w.cols, nr, x + t0 * w.cols, nt, w.cols, y + t0 * y_stride + (r - r0),
                    y_stride);
    }
  }
}

}  // namespace keel::ops
