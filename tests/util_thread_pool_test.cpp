// The thread pool (util/thread_pool.h): every task of every loop runs exactly once, on a valid
// thread index, whether the workers are spinning for the next loop, parked after an idle spell,
// or joining a loop late; loops of one task run inline; the pool stops with parked workers; each
// thread runs its own contiguous span of the tasks from the front and helps with others' from
// the back.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "keel/util/thread_pool.h"

namespace {

using keel::ThreadPool;

void expect_each_task_once(ThreadPool& pool, size_t count, int loop) {
  std::vector<std::atomic<int>> hits(count);
  std::atomic<int> bad_thread{0};
  pool.parallel_for(count, [&](size_t i, int t) {
    if (t < 0 || t >= pool.size()) ++bad_thread;
    hits[i].fetch_add(1, std::memory_order_relaxed);
  });
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(hits[i].load(), 1) << "loop " << loop << ", task " << i << " of " << count;
  ASSERT_EQ(bad_thread.load(), 0) << "loop " << loop;
}

TEST(ThreadPool, EveryTaskRunsOnceInLoopsBackToBack) {
  for (const int threads : {2, 3, 5}) {
    ThreadPool pool(threads);
    for (int loop = 0; loop < 3000; ++loop) expect_each_task_once(pool, 1 + loop % 41, loop);
  }
}

TEST(ThreadPool, WorkersThatParkedJoinTheNextLoop) {
  ThreadPool pool(3);
  for (int loop = 0; loop < 6; ++loop) {
    // Longer than the spin: the workers park, and the next loop must wake them.
    std::this_thread::sleep_for(ThreadPool::kSpinBeforePark * 3);
    std::atomic<int> others{0};
    pool.parallel_for(200, [&](size_t, int t) {
      if (t != 0) ++others;
      std::this_thread::sleep_for(std::chrono::microseconds(200));  // long enough for a woken worker to help
    });
    EXPECT_GT(others.load(), 0) << "loop " << loop << ": no parked worker woke";
    expect_each_task_once(pool, 17, loop);
  }
}

TEST(ThreadPool, SlowTasksAndUnevenLoopsKeepTheirResults) {
  ThreadPool pool(4);
  for (int loop = 0; loop < 200; ++loop) {
    const size_t count = 2 + static_cast<size_t>(loop % 9);
    std::vector<int> out(count, -1);
    pool.parallel_for(count, [&](size_t i, int) {
      if (i % 3 == 0) std::this_thread::yield();
      out[i] = static_cast<int>(i) * loop;
    });
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[i], static_cast<int>(i) * loop);
  }
}

TEST(ThreadPool, OneTaskRunsOnTheCallerAndAParkedPoolStops) {
  auto pool = std::make_unique<ThreadPool>(4);
  int thread = -1;
  pool->parallel_for(1, [&](size_t, int t) { thread = t; });
  EXPECT_EQ(thread, 0);
  std::this_thread::sleep_for(ThreadPool::kSpinBeforePark * 3);
  pool.reset();  // joins parked workers: a lost wake-up would hang here (the test's timeout)
}

TEST(ThreadPool, EachThreadRunsItsOwnSpanInOrderAndHelpsFromTheBack) {
  for (const int threads : {2, 3}) {
    ThreadPool pool(threads);
    for (const size_t count : {size_t{7}, size_t{64}, size_t{301}}) {
      std::mutex mutex;
      std::vector<std::vector<size_t>> ran(static_cast<size_t>(threads));  // per thread, in order
      pool.parallel_for(count, [&](size_t i, int t) {
        if (i % 5 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
        std::lock_guard lock(mutex);
        ran[static_cast<size_t>(t)].push_back(i);
      });
      const size_t n = static_cast<size_t>(threads);
      for (size_t t = 0; t < n; ++t) {
        const size_t begin = t * count / n, end = (t + 1) * count / n;
        size_t next_own = begin;  // its own span: begin, begin + 1, ... in order
        std::vector<size_t> last_helped(n, SIZE_MAX);  // others' spans: from the back, downwards
        for (const size_t i : ran[t]) {
          const size_t owner = [&] {
            for (size_t s = 0; s < n; ++s)
              if (i >= s * count / n && i < (s + 1) * count / n) return s;
            return n;
          }();
          ASSERT_LT(owner, n);
          if (owner == t) {
            ASSERT_EQ(i, next_own) << threads << " threads, " << count << " tasks, thread " << t;
            ++next_own;
          } else {
            ASSERT_LT(i, last_helped[owner]) << threads << " threads, " << count << " tasks, thread " << t;
            last_helped[owner] = i;
          }
        }
        ASSERT_LE(next_own, end);
      }
    }
  }
}

}  // namespace
