#include "keel/ops/machine_limits.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "keel/ops/bf16_dot_x86.h"
#include "keel/ops/simd_kernels.h"

namespace keel::ops {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

MachineLimits measure_machine_limits(ThreadPool& pool) {
  MachineLimits m;
  // Bandwidth: each thread sums its slice of a 1 GiB buffer (bigger than any cache); best of 3.
  const size_t bytes = size_t{1} << 30;
  std::vector<uint64_t> buf(bytes / 8);
  const size_t threads = static_cast<size_t>(pool.size());
  pool.parallel_for(threads, [&](size_t t, int) {  // first touch, in parallel, like the weights
    const size_t n = buf.size() / threads;
    std::memset(buf.data() + t * n, 1, n * 8);
  });
  std::vector<uint64_t> sums(threads);
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(threads, [&](size_t t, int) {
      const size_t n = buf.size() / threads;
      const uint64_t* p = buf.data() + t * n;
      uint64_t a = 0, b = 0, c = 0, d = 0;
      for (size_t i = 0; i + 4 <= n; i += 4) {
        a += p[i];
        b += p[i + 1];
        c += p[i + 2];
        d += p[i + 3];
      }
      sums[t] = a + b + c + d;
    });
    best = std::min(best, seconds_since(t0));
  }
  m.read_bandwidth_bytes_per_s = static_cast<double>(bytes) / best;

  // The best of three bursts on every thread at once, in flops per second.
  std::vector<double> flops(threads);
  std::vector<float> sink(threads);
  auto peak = [&](double (*burst)(int64_t, float*)) {
    double best_flops = 0;
    for (int rep = 0; rep < 3; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      pool.parallel_for(threads, [&](size_t t, int) { flops[t] = burst(20'000'000, &sink[t]); });
      double total = 0;
      for (double f : flops) total += f;
      best_flops = std::max(best_flops, total / seconds_since(t0));
    }
    return best_flops;
  };
  m.peak_flops = peak(fma_burst);
  m.peak_bf16_flops = peak(bf16_dp_burst);
  return m;
}

}  // namespace keel::ops
