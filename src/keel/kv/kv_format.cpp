// Quantizing and dequantizing single rows (layouts in kv_format.h). Encoding runs once per token
// and kv head when a block leaves the full-precision window, so plain scalar code is enough here;
// the hot path is the attention kernel, which reads these layouts directly.
#include "keel/kv/kv_format.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "keel/kv/kv_format_layout.h"
#include "keel/util/error.h"
#include "keel/util/half.h"

namespace keel::kv {
namespace {

constexpr int64_t kGroup = kKvQuantGroup;

void check_dim(KvFormat format, int64_t dim) {
  if (dim <= 0 || (format != KvFormat::BF16 && dim % kGroup != 0))
    throw Error("KV rows in " + std::string(kv_format_name(format)) + " need a positive multiple of " +
                std::to_string(kGroup) + " values, got " + std::to_string(dim));
}

// Smallest bf16 >= x (x finite, >= 0), so a scale never shrinks when stored.
uint16_t bf16_at_least(float x) {
  uint16_t b = float_to_bf16(x);
  if (bf16_to_float(b) < x) ++b;
  return b;
}

// Largest bf16 <= x (x finite), so a zero point never rises above the group minimum when stored.
uint16_t bf16_at_most(float x) {
  const uint16_t b = float_to_bf16(x);
  if (!(bf16_to_float(b) > x)) return b;
  if (b & 0x8000u) return static_cast<uint16_t>(b + 1);  // negative (or -0): grow the magnitude
  if (b == 0) return 0x8001u;                              // +0 above a tiny negative x
  return static_cast<uint16_t>(b - 1);
}

// round(v) clamped to [lo, hi]; NaN maps to lo's neighbour 0-ish value through the clamp.
int round_clamp(float v, int lo, int hi) {
  if (!(v >= static_cast<float>(lo))) return lo;
  if (!(v <= static_cast<float>(hi))) return hi;
  return static_cast<int>(std::nearbyint(v));
}

void encode_int8(const float* x, int64_t dim, uint8_t* dst) {
  uint8_t* meta = dst + layout::meta_offset(KvFormat::Int8, dim);
  for (int64_t g = 0; g < dim / kGroup; ++g) {
    const float* xg = x + g * kGroup;
    float amax = 0;
    for (int64_t i = 0; i < kGroup; ++i) amax = std::max(amax, std::fabs(xg[i]));
    const uint16_t sb = bf16_at_least(amax / 127.0f);
    const float s = bf16_to_float(sb);
    layout::store_u16(meta + 2 * g, sb);
    for (int64_t i = 0; i < kGroup; ++i) {
      const int c = s > 0 ? round_clamp(xg[i] / s, -127, 127) : 0;
      dst[g * kGroup + i] = static_cast<uint8_t>(static_cast<int8_t>(c));
    }
  }
}

void decode_int8(const uint8_t* src, int64_t dim, float* x) {
  const uint8_t* meta = src + layout::meta_offset(KvFormat::Int8, dim);
  for (int64_t g = 0; g < dim / kGroup; ++g) {
    const float s = bf16_to_float(layout::load_u16(meta + 2 * g));
    for (int64_t i = 0; i < kGroup; ++i) x[g * kGroup + i] = s * static_cast<float>(static_cast<int8_t>(src[g * kGroup + i]));
  }
}

// Affine formats: `bits` 4 or 2; code i of a group sits in byte i % per, at bits (i / per) * bits,
// where per = 32 * bits / 8 is the group's byte count.
void encode_affine(int bits, const float* x, int64_t dim, uint8_t* dst) {
  const KvFormat f = bits == 4 ? KvFormat::Int4 : KvFormat::Int2;
  const int64_t per = layout::code_bytes_per_group(f);
  const int top = (1 << bits) - 1;
  uint8_t* meta = dst + layout::meta_offset(f, dim);
  for (int64_t g = 0; g < dim / kGroup; ++g) {
    const float* xg = x + g * kGroup;
    float lo = xg[0], hi = xg[0];
    for (int64_t i = 1; i < kGroup; ++i) {
      lo = std::min(lo, xg[i]);
      hi = std::max(hi, xg[i]);
    }
    const uint16_t mb = bf16_at_most(lo);
    const float m = bf16_to_float(mb);
    const uint16_t sb = bf16_at_least((hi - m) / static_cast<float>(top));
    const float s = bf16_to_float(sb);
    layout::store_u16(meta + 4 * g, sb);
    layout::store_u16(meta + 4 * g + 2, mb);
    uint8_t* codes = dst + g * per;
    std::fill(codes, codes + per, 0);
    for (int64_t i = 0; i < kGroup; ++i) {
      const int c = s > 0 ? round_clamp((xg[i] - m) / s, 0, top) : 0;
      codes[i % per] = static_cast<uint8_t>(codes[i % per] | (c << ((i / per) * bits)));
    }
  }
}

void decode_affine(int bits, const uint8_t* src, int64_t dim, float* x) {
  const KvFormat f = bits == 4 ? KvFormat::Int4 : KvFormat::Int2;
  const int64_t per = layout::code_bytes_per_group(f);
  const int top = (1 << bits) - 1;
  const uint8_t* meta = src + layout::meta_offset(f, dim);
  for (int64_t g = 0; g < dim / kGroup; ++g) {
    const float s = bf16_to_float(layout::load_u16(meta + 4 * g));
    const float m = bf16_to_float(layout::load_u16(meta + 4 * g + 2));
    const uint8_t* codes = src + g * per;
    for (int64_t i = 0; i < kGroup; ++i) {
      const int c = (codes[i % per] >> ((i / per) * bits)) & top;
      x[g * kGroup + i] = m + s * static_cast<float>(c);
    }
  }
}

}  // namespace

std::optional<KvFormat> format_from_name(std::string_view name) {
  for (KvFormat f : kAllKvFormats)
    if (kv_format_name(f) == name) return f;
  return std::nullopt;
}

bool rotated_by_default(KvFormat f) { return f == KvFormat::Int4 || f == KvFormat::Int2; }

size_t row_bytes(KvFormat format, int64_t dim) { return static_cast<size_t>(kv_vector_bytes(format, dim)); }

void encode_kv_row(KvFormat format, const float* src, int64_t dim, bool rotate, uint8_t* dst) {
  check_dim(format, dim);
  std::vector<float> rotated;
  if (rotate) {
    rotated.assign(src, src + dim);
    rotate_row(rotated.data(), dim);
    src = rotated.data();
  }
  switch (format) {
    case KvFormat::BF16:
      for (int64_t i = 0; i < dim; ++i) layout::store_u16(dst + 2 * i, float_to_bf16(src[i]));
      return;
    case KvFormat::Int8: return encode_int8(src, dim, dst);
    case KvFormat::Int4: return encode_affine(4, src, dim, dst);
    case KvFormat::Int2: return encode_affine(2, src, dim, dst);
  }
}

void decode_kv_row(KvFormat format, const uint8_t* src, int64_t dim, bool rotate, float* dst) {
  check_dim(format, dim);
  switch (format) {
    case KvFormat::BF16:
      for (int64_t i = 0; i < dim; ++i) dst[i] = bf16_to_float(layout::load_u16(src + 2 * i));
      break;
    case KvFormat::Int8: decode_int8(src, dim, dst); break;
    case KvFormat::Int4: decode_affine(4, src, dim, dst); break;
    case KvFormat::Int2: decode_affine(2, src, dim, dst); break;
  }
  if (rotate) rotate_row(dst, dim);
}

}  // namespace keel::kv
