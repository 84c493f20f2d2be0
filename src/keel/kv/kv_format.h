#pragma once
// Encoding of one cached K or V row (one token, one kv head) in each KV format, and the
// Walsh-Hadamard rotation used below 8 bits. Sizes come from kv_format_cost.h, the one source of
// bytes per vector (row_bytes(f, dim) == kv_vector_bytes(f, dim)).
//
// Layouts (G = dim / 32 groups; all multi-byte fields little-endian, rows need no alignment):
//   bf16: dim raw bf16 values (round to nearest even).
//   int8: dim int8 codes c in [-127, 127], then G bf16 scales s: x ~ s * c (symmetric).
//   int4: 16 bytes per group (byte j = c[j] | c[j+16] << 4, codes in [0, 15]), then G pairs of
//         bf16 (scale s, zero point m): x ~ m + s * c (affine).
//   int2: 8 bytes per group (byte j = c[j] | c[j+8] << 2 | c[j+16] << 4 | c[j+24] << 6, codes in
//         [0, 3]), then G pairs of bf16 (s, m): x ~ m + s * c.
// Error bound (per element, in the domain that was quantized): |x - decoded| <= s/2 of its group,
// plus float rounding of the decode (a few ulp of |x|). The stored scale is rounded up and the
// zero point rounded down to bf16, and codes are computed from the stored values, so the bf16
// rounding of s and m never breaks the bound. For a rotated row the bound holds per element of the
// rotated row; the rotation is orthonormal, so the L2 error of the decoded row is the same as in
// the rotated domain: ||x - decoded||_2 <= sqrt(sum over groups of 32 * (s/2)^2).
//
// Threads: pure functions; encode, decode, fwht and rotate_row write only the buffers they are given
// (no shared scratch): any thread, on distinct buffers.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "keel/kv/kv_format_cost.h"

namespace keel::kv {

// "bf16", "int8", "int4", "int2" (kv_format_name() is the inverse); nullopt for anything else.
std::optional<KvFormat> format_from_name(std::string_view name);

// Below 8 bits an outlier channel would set the scale of its whole group; rotating spreads it
// over all elements first. True for int4 and int2.
bool rotated_by_default(KvFormat f);

// Bytes of one encoded row of `dim` values == kv_vector_bytes(format, dim). The quantized formats
// need dim to be a positive multiple of 32 (encode/decode throw keel::Error otherwise); bf16 takes
// any positive dim.
size_t row_bytes(KvFormat format, int64_t dim);

// Encodes a row. rotate: apply rotate_row() first (meant for int4 and int2; allowed for any format).
void encode_kv_row(KvFormat format, const float* src, int64_t dim, bool rotate, uint8_t* dst);
// Decodes a row, un-rotating it if it was encoded with rotate.
void decode_kv_row(KvFormat format, const uint8_t* src, int64_t dim, bool rotate, float* dst);

// Orthonormal fast Walsh-Hadamard transform (scaled by 1/sqrt(n)), in place; its own inverse.
// n must be a power of 2 (keel::Error otherwise).
void fwht(float* x, int64_t n);

// The rotation applied to rows of `dim` values: fwht over each block of P consecutive values,
// where P is the largest power of two dividing dim (the whole row for 64 or 128; 32-blocks for 96).
// Orthonormal and its own inverse, like fwht.
void rotate_row(float* x, int64_t dim);

}  // namespace keel::kv
