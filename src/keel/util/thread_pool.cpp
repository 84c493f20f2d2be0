#include "keel/util/thread_pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <stdexcept>

namespace keel {
namespace {

// One step of a busy wait: a pause that lets the core's other hyperthread run, and after a while a
// yield, so that a waiter never holds a core another thread of the loop needs (more threads than
// cores, as when tests run side by side).
inline void spin_wait(int spins) {
  if (spins >= 4096) {
    std::this_thread::yield();
    return;
  }
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

int hardware_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = hardware_threads();
  spans_ = std::make_unique<Span[]>(static_cast<size_t>(threads));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(park_mutex_);
    stopping_.store(true);
  }
  park_.notify_all();
  for (auto& t : workers_) t.join();
}

bool ThreadPool::claim(Span& span, bool front, size_t& task) {
  uint64_t left = span.left.load(std::memory_order_relaxed);
  for (;;) {
    const uint64_t first = left >> 32, end = left & 0xffffffffu;
    if (first >= end) return false;
    const uint64_t rest = front ? (first + 1) << 32 | end : first << 32 | (end - 1);
    if (span.left.compare_exchange_weak(left, rest, std::memory_order_relaxed)) {
      task = static_cast<size_t>(front ? first : end - 1);
      return true;
    }
  }
}

void ThreadPool::run_tasks(int thread_index) {
  const int n = size();
  // Counted once at the end: finished_'s cache line is shared by every thread, and a decode step's
  // tasks take well under a microsecond each, so an increment per task cost a tenth of the step.
  size_t ran = 0;
  for (int k = 0; k < n; ++k) {  // its own span from the front, then the others' from the back
    Span& span = spans_[static_cast<size_t>((thread_index + k) % n)];
    for (size_t i; claim(span, k == 0, i); ++ran) (*task_)(i, thread_index);
  }
  if (ran > 0) finished_.fetch_add(ran, std::memory_order_release);
}

void ThreadPool::worker_loop(int thread_index) {
  uint64_t seen = 0;
  auto ready = [&](uint64_t g) { return g != seen && g % 2 == 0; };
  for (;;) {
    // Spin for the next loop, then park.
    const auto spin_until = std::chrono::steady_clock::now() + kSpinBeforePark;
    uint64_t g = generation_.load(std::memory_order_acquire);
    for (int spins = 0; !ready(g) && !stopping_.load(std::memory_order_relaxed); ++spins) {
      spin_wait(spins);
      if (spins % 256 == 255 && std::chrono::steady_clock::now() > spin_until) {
        std::unique_lock lock(park_mutex_);
        ++parked_;
        park_.wait(lock, [&] { return stopping_.load() || ready(generation_.load(std::memory_order_acquire)); });
        --parked_;
      }
      g = generation_.load(std::memory_order_acquire);
    }
    if (stopping_.load()) return;
    busy_.fetch_add(1, std::memory_order_seq_cst);
    if (generation_.load(std::memory_order_seq_cst) == g) {  // still that loop: its fields stay put
      seen = g;
      run_tasks(thread_index);
    }
    busy_.fetch_sub(1, std::memory_order_release);
  }
}

void ThreadPool::parallel_for(size_t count, const std::function<void(size_t, int)>& task) {
  if (count == 0) return;
  if (count > 0xffffffffu) throw std::length_error("ThreadPool::parallel_for: more than 2^32 - 1 tasks");
  if (workers_.empty() || count == 1) {
    for (size_t i = 0; i < count; ++i) task(i, 0);
    return;
  }
  // Set up: mark the generation odd, wait out any worker still inside the last loop (all its tasks
  // are claimed, so it is leaving), write the loop, then publish it.
  const uint64_t g = generation_.load(std::memory_order_relaxed);
  generation_.store(g + 1, std::memory_order_seq_cst);
  for (int spins = 0; busy_.load(std::memory_order_seq_cst) != 0; ++spins) spin_wait(spins);
  task_ = &task;
  const size_t n = static_cast<size_t>(size());
  for (size_t s = 0; s < n; ++s)
    spans_[s].left.store(uint64_t{s * count / n} << 32 | (s + 1) * count / n, std::memory_order_relaxed);
  finished_.store(0, std::memory_order_relaxed);
  generation_.store(g + 2, std::memory_order_release);
  {
    std::lock_guard lock(park_mutex_);
    if (parked_ > 0) park_.notify_all();
  }
  run_tasks(0);
  // Done when every task has run; workers still leaving are waited for by the next call.
  for (int spins = 0; finished_.load(std::memory_order_acquire) != count; ++spins) spin_wait(spins);
}

}  // namespace keel
