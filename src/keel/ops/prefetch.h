#pragma once
// Asking for weight rows before a kernel reads them. A decode step streams every weight byte from
// memory once, row after row; the cores' own prefetchers do not run far enough ahead of such a
// walk to keep memory busy. Measured on an AMD EPYC, AVX2 kernels: bf16 decode of Qwen2.5-0.5B's
// shape read 27 GB/s of a measured 40 without; the 896 x 4864 matrix read 16.8 GB/s on one
// thread with each row's own bytes 8 KiB ahead, 32.7 with the next rows'. So:
//   - GemvRows (simd_kernels.cpp), four rows at a time, asks for the next four rows into L2, in
//     address order, as it reads the current four. Asking for them row by row (four streams, the
//     same element of each, into L1) read half as fast on a Zen 4 (AMD EPYC family 25 model 17,
//     AVX2 target, bf16 4864 x 896 from memory: one thread 785-1018 -> 467-541 us, two threads
//     427-512 -> 315-319; 896 x 4864: 528-604 -> 366-420 and 295-361 -> 279-340);
//   - the int16 products (int16_dot.cpp), one row at a time, ask for the bytes kPrefetchAhead
//     beyond the row's start (prefetch_ahead); on interleaved rows, the lines kPrefetchAhead
//     beyond each block column, a part before each few units;
//   - the AVX-512 kernels (*_x86.cpp) ask for the bytes 4 KiB beyond the ones they read.
//
// Stateless; callable from any thread. A prefetch never faults, so the addresses may run past the
// end of a matrix: they are formed as integers, not as pointers into it.
#include <cstdint>

#include "hwy/base.h"
#include "hwy/cache_control.h"

namespace keel::ops {

inline constexpr int64_t kPrefetchAhead = 8192;  // bytes: a few rows of a small matrix

// Prefetches the cache line at p + offset bytes. Always inlined: GCC found an out-of-line
// prefetch_at free of side effects and deleted its calls from the target-specific kernels
// (int16_dot.cpp's interleaved columns ran with no prefetch at all until this was inlined).
HWY_INLINE void prefetch_at(const void* p, int64_t offset) {
  hwy::Prefetch(reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(offset)));
}

// Prefetches the cache line at p + offset bytes into L2, not L1: for a line wanted thousands of
// cycles ahead, which L1 (32-48 KiB) might drop before its turn.
HWY_INLINE void prefetch_to_l2(const void* p, int64_t offset) {
  __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(offset)), 0, 2);
}

// Prefetches the cache lines of [p + kPrefetchAhead, p + kPrefetchAhead + bytes).
HWY_INLINE void prefetch_ahead(const void* p, int64_t bytes) {
  for (int64_t i = 0; i < bytes; i += 64) prefetch_at(p, kPrefetchAhead + i);
}

}  // namespace keel::ops
