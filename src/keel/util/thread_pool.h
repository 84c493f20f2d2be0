#pragma once
// A fixed set of worker threads that run one parallel loop at a time. The calling thread takes part,
// so a pool of N threads starts N-1 workers. Kernels split their output rows into tasks; each task
// learns which thread runs it so it can use that thread's scratch memory.
//
// A decode step runs a few hundred loops of tens of microseconds each, so waking parked threads
// for each would cost a large share of it. Workers therefore spin on the loop counter for a while
// after each loop (kSpinBeforePark) and only then park on a condition variable. An idle pool
// (between requests) is parked and costs no CPU.
//
// Each thread owns one contiguous span of a loop's tasks and claims them in order, then helps with
// the other spans. Kernels give consecutive tasks consecutive weight rows, so each core streams
// one long run of memory: tasks dealt out alternately (0 to one thread, 1 to the next, ...) send
// each core's prefetcher into the rows the other core reads, and halved decode speed on 2 cores.
//
// Threads: parallel_for is called by one thread at a time (the pool's owner); tasks run on that
// thread and the workers.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace keel {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads <= 0 means one per hardware core
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls task(i, thread_index) for every i in [0, count), spread over the threads; returns when all
  // are done. thread_index is in [0, size()). Not reentrant: do not call from inside a task. At
  // most 2^32 - 1 tasks (std::length_error beyond).
  void parallel_for(size_t count, const std::function<void(size_t, int)>& task);

  // How long a worker spins for the next loop before it parks.
  static constexpr std::chrono::microseconds kSpinBeforePark{1000};

 private:
  void worker_loop(int thread_index);
  void run_tasks(int thread_index);

  std::vector<std::thread> workers_;
  // The loop in flight. `generation_` is odd while the caller writes task_ and the spans, and even
  // once they are ready; a worker announces itself in busy_ before it checks the generation, and
  // the caller writes only when no worker is busy, so a worker never reads them half-written.
  const std::function<void(size_t, int)>* task_ = nullptr;
  // A span's unclaimed tasks [first, end), packed as first << 32 | end: its thread claims from the
  // front, helpers from the back, so the owner's run stays contiguous to the end.
  struct alignas(64) Span {
    std::atomic<uint64_t> left{0};
  };
  static bool claim(Span& span, bool front, size_t& task);
  std::unique_ptr<Span[]> spans_;      // size() of them: thread i's is spans_[i]
  std::atomic<size_t> finished_{0};  // tasks run
  std::atomic<uint64_t> generation_{0};  // twice the loops started (plus one while one is set up)
  std::atomic<int> busy_{0};             // workers inside a loop
  std::atomic<bool> stopping_{false};
  // Parking: a worker that spun long enough sleeps here until the next loop or the end.
  std::mutex park_mutex_;
  std::condition_variable park_;
  int parked_ = 0;  // under park_mutex_
};

int hardware_threads();

}  // namespace keel
