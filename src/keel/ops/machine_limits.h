#pragma once
// What this machine can do at best, measured rather than looked up, so benchmark results can be
// reported as fractions of the real limits: memory read bandwidth (what bounds decode) and peak
// f32 FMA and bf16 dot-product throughput (what bounds prefill: bf16 and MLX weights on AVX512_BF16
// CPUs run on the second).
#include "keel/util/thread_pool.h"

namespace keel::ops {

struct MachineLimits {
  double read_bandwidth_bytes_per_s = 0;  // all threads streaming a buffer far larger than cache
  double peak_flops = 0;                   // all threads, f32 FMA at the dispatched SIMD width
  double peak_bf16_flops = 0;              // all threads, VDPBF16PS (0: the CPU has no AVX512_BF16)
};

MachineLimits measure_machine_limits(ThreadPool& pool);

}  // namespace keel::ops
