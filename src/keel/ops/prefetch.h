#pragma once
// Asking for weight rows before a kernel reads them. A decode step streams every weight byte from
// memory once, row after row; the cores' own prefetchers do not run far enough ahead of such a
// walk to keep memory busy (measured on an AMD EPYC, AVX2 kernels, 2 threads: bf16 decode of
// Qwen2.5-0.5B's shape read 27 GB/s of a measured 40 without, 35-42 with). So the kernels that
// walk rows ask for the bytes kPrefetchAhead beyond the ones they are about to read.
//
// Stateless; callable from any thread. A prefetch never faults, so the addresses may run past the
// end of a matrix: they are formed as integers, not as pointers into it.
#include <cstdint>

#include "hwy/cache_control.h"

namespace keel::ops {

inline constexpr int64_t kPrefetchAhead = 8192;  // bytes; a few rows of a small matrix

// Prefetches the cache lines of [p + kPrefetchAhead, p + kPrefetchAhead + bytes).
inline void prefetch_ahead(const void* p, int64_t bytes) {
  const uintptr_t first = reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(kPrefetchAhead);
  for (int64_t i = 0; i < bytes; i += 64) hwy::Prefetch(reinterpret_cast<const uint8_t*>(first + static_cast<uintptr_t>(i)));
}

}  // namespace keel::ops
