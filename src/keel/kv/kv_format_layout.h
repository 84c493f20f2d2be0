#pragma once
// Where the fields of an encoded row sit (see the layouts in kv_format.h). Shared by the encoder
// and the attention kernels; not part of the public API.
//
// Threads: constexpr and inline functions with no state (load_u16/store_u16 touch only the bytes
// they are given): any thread.
#include <cstdint>
#include <cstring>

#include "keel/kv/kv_format_cost.h"

namespace keel::kv::layout {

// Bytes of codes per group of 32 values.
constexpr int64_t code_bytes_per_group(KvFormat f) {
  switch (f) {
    case KvFormat::BF16: return 64;
    case KvFormat::Int8: return 32;
    case KvFormat::Int4: return 16;
    case KvFormat::Int2: return 8;
  }
  return 0;
}

// Offset of the per-group metadata (scales, or scale/zero-point pairs) after the codes.
constexpr int64_t meta_offset(KvFormat f, int64_t dim) { return dim / kKvQuantGroup * code_bytes_per_group(f); }

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

}  // namespace keel::kv::layout
