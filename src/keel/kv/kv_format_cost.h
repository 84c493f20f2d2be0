#pragma once
// What one cached K or V vector costs in each KV format. The planner sizes memory with these
// numbers and the KV pool allocates its blocks with them (keel/kv/kv_format.h encodes rows of
// exactly this size), so a plan never disagrees with the pool.
//
// Quantized formats scale each token's vector separately, in groups of 32 elements along head_dim:
//   int8: 1 byte per element + one 2-byte (bf16) scale per group                 (symmetric)
//   int4: half a byte per element + a 2-byte scale and a 2-byte zero point per group (affine)
//   int2: a quarter byte per element + a 2-byte scale and a 2-byte zero point per group (affine)
//
// Threads: constants and constexpr functions: any thread.
#include <cstdint>
#include <string_view>

namespace keel {

enum class KvFormat { BF16, Int8, Int4, Int2 };

inline constexpr int64_t kKvQuantGroup = 32;
inline constexpr int64_t kKvScaleBytes = 2;
inline constexpr int64_t kKvZeroPointBytes = 2;

constexpr int64_t kv_quant_groups(int64_t elements) { return (elements + kKvQuantGroup - 1) / kKvQuantGroup; }

// Bytes of one vector of `elements` values (one head of K, one head of V, or one MLA latent).
constexpr int64_t kv_vector_bytes(KvFormat format, int64_t elements) {
  switch (format) {
    case KvFormat::BF16:
      return 2 * elements;
    case KvFormat::Int8:
      return elements + kv_quant_groups(elements) * kKvScaleBytes;
    case KvFormat::Int4:
      return (elements + 1) / 2 + kv_quant_groups(elements) * (kKvScaleBytes + kKvZeroPointBytes);
    case KvFormat::Int2:
      return (elements + 3) / 4 + kv_quant_groups(elements) * (kKvScaleBytes + kKvZeroPointBytes);
  }
  return 0;
}

// A head of 128: bf16 256 bytes, int8 128 + 4 scales x 2 = 136, int4 64 + 4 x (2 + 2) = 80,
// int2 32 + 4 x (2 + 2) = 48.
static_assert(kv_vector_bytes(KvFormat::BF16, 128) == 256);
static_assert(kv_vector_bytes(KvFormat::Int8, 128) == 136);
static_assert(kv_vector_bytes(KvFormat::Int4, 128) == 80);
static_assert(kv_vector_bytes(KvFormat::Int2, 128) == 48);

constexpr std::string_view kv_format_name(KvFormat format) {
  switch (format) {
    case KvFormat::BF16: return "bf16";
    case KvFormat::Int8: return "int8";
    case KvFormat::Int4: return "int4";
    case KvFormat::Int2: return "int2";
  }
  return "?";
}

// The formats one layer's rows of one block are stored in once out of the recent window: keys and
// values may differ (a layer-aware KV policy keeps the early layers' keys more precise,
// keel/kv/kv_policy.h). Both bf16: the rows are never quantized and stay in their full form.
struct KvRowForms {
  KvFormat k = KvFormat::BF16;
  KvFormat v = KvFormat::BF16;
  constexpr bool quantized() const { return k != KvFormat::BF16 || v != KvFormat::BF16; }
  constexpr bool operator==(const KvRowForms&) const = default;
};

// Most precise first.
inline constexpr KvFormat kAllKvFormats[] = {KvFormat::BF16, KvFormat::Int8, KvFormat::Int4, KvFormat::Int2};

}  // namespace keel
