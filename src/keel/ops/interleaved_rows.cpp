#include "keel/ops/interleaved_rows.h"

#include <cstring>
#include <string>

#include "keel/util/error.h"

namespace keel::ops {
namespace {

constexpr int kChunk = 2;  // code bytes of a row side by side

struct BlockParts {
  int64_t header, codes;  // bytes
};

BlockParts parts_of(WeightFormat f) {
  if (f == WeightFormat::Q4_0) return {2, 16};
  if (f == WeightFormat::MXFP4_GGUF) return {1, 16};
  if (f == WeightFormat::Q8_0) return {2, 32};
  // Every byte in chunks: Q5_0's d and qh, Q4_K's d, dmin and scale bytes, Q6_K's scales and d.
  if (f == WeightFormat::Q5_0) return {0, 22};
  if (f == WeightFormat::Q4_K) return {0, 144};
  if (f == WeightFormat::Q5_K) return {0, 176};
  if (f == WeightFormat::Q6_K) return {0, 210};
  throw InternalError(std::string("rows of ") + weight_format_name(f) + " are not interleaved");
}

}  // namespace

bool ggml_interleavable(WeightFormat f) {
  return f == WeightFormat::Q4_0 || f == WeightFormat::MXFP4_GGUF || f == WeightFormat::Q8_0 || f == WeightFormat::Q5_0 ||
         f == WeightFormat::Q4_K || f == WeightFormat::Q5_K || f == WeightFormat::Q6_K;
}

// The group's columns for blocks of kHeader + kCodes bytes (constants, so the copies unroll: a
// model's worth of 2-byte copies).
template <int64_t kHeader, int64_t kCodes>
void interleave_group(const uint8_t* rows, int64_t blocks, uint8_t* out) {
  constexpr int64_t kBytes = kHeader + kCodes;
  const int64_t row_bytes = blocks * kBytes;
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* column = out + b * kInterleavedRows * kBytes;
    for (int64_t lane = 0; lane < kInterleavedRows; ++lane) {
      const uint8_t* block = rows + lane * row_bytes + b * kBytes;
      std::memcpy(column + lane * kHeader, block, kHeader);
      for (int64_t c = 0; c < kCodes / kChunk; ++c)
        std::memcpy(column + kInterleavedRows * kHeader + (c * kInterleavedRows + lane) * kChunk, block + kHeader + c * kChunk,
                    kChunk);
    }
  }
}

void interleave_ggml_group(WeightFormat f, const uint8_t* rows, int64_t cols, uint8_t* out) {
  const BlockParts p = parts_of(f);
  const int64_t blocks = cols / ggml_block_size(f).elements;
  if (p.header == 2 && p.codes == 16) return interleave_group<2, 16>(rows, blocks, out);
  if (p.header == 1 && p.codes == 16) return interleave_group<1, 16>(rows, blocks, out);
  if (p.header == 2 && p.codes == 32) return interleave_group<2, 32>(rows, blocks, out);
  if (p.header == 0 && p.codes == 144) return interleave_group<0, 144>(rows, blocks, out);
  if (p.header == 0 && p.codes == 176) return interleave_group<0, 176>(rows, blocks, out);
  if (p.header == 0 && p.codes == 22) return interleave_group<0, 22>(rows, blocks, out);
  if (p.header == 0 && p.codes == 210) return interleave_group<0, 210>(rows, blocks, out);
  throw InternalError(std::string("no interleaving for ") + weight_format_name(f));
}

void deinterleave_ggml_block(WeightFormat f, const uint8_t* group, int64_t b, int64_t lane, uint8_t* out) {
  const BlockParts p = parts_of(f);
  const uint8_t* column = group + b * kInterleavedRows * ggml_block_size(f).bytes;
  std::memcpy(out, column + lane * p.header, static_cast<size_t>(p.header));
  for (int64_t c = 0; c < p.codes / kChunk; ++c)
    std::memcpy(out + p.header + c * kChunk, column + kInterleavedRows * p.header + (c * kInterleavedRows + lane) * kChunk,
                kChunk);
}

void deinterleave_ggml_row(WeightFormat f, const uint8_t* data, int64_t cols, int64_t r, uint8_t* out) {
  const GgmlBlock blk = ggml_block_size(f);
  const int64_t blocks = cols / blk.elements, lane = r % kInterleavedRows;
  const uint8_t* group = data + (r - lane) * blocks * blk.bytes;
  for (int64_t b = 0; b < blocks; ++b) deinterleave_ggml_block(f, group, b, lane, out + b * blk.bytes);
}

}  // namespace keel::ops
