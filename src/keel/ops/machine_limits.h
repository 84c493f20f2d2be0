#pragma once
// What this machine can do at best, measured rather than looked up, so benchmark results can be
// reported as fractions of the real limits: memory read bandwidth (what bounds decode) and peak
// f32 FMA throughput (what bounds prefill).
#include "keel/util/thread_pool.h"

namespace keel::ops {

struct MachineLimits {
  double read_bandwidth_bytes_per_s = 0;  // all threads streaming a buffer far larger than cache
  double peak_flops = 0;                   // all threads, f32 FMA at the dispatched SIMD width
};

MachineLimits measure_machine_limits(ThreadPool& pool);

}  // namespace keel::ops
