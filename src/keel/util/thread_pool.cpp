#include "keel/util/thread_pool.h"

namespace keel {

int hardware_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = hardware_threads();
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_tasks(int thread_index) {
  std::unique_lock lock(mutex_);
  while (next_ < count_) {
    size_t i = next_++;
    lock.unlock();
    (*task_)(i, thread_index);
    lock.lock();
    ++finished_;
  }
  if (finished_ == count_) done_.notify_all();
}

void ThreadPool::worker_loop(int thread_index) {
  size_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      ++busy_workers_;
    }
    run_tasks(thread_index);
    {
      std::lock_guard lock(mutex_);
      --busy_workers_;
    }
    done_.notify_all();
  }
}

void ThreadPool::parallel_for(size_t count, const std::function<void(size_t, int)>& task) {
  if (count == 0) return;
  if (workers_.empty() || count == 1) {
    for (size_t i = 0; i < count; ++i) task(i, 0);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    task_ = &task;
    count_ = count;
    next_ = 0;
    finished_ = 0;
    ++generation_;
  }
  wake_.notify_all();
  run_tasks(0);
  // Wait until every task ran and every worker has left run_tasks, so the next call cannot race.
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return finished_ == count_ && busy_workers_ == 0; });
  task_ = nullptr;
}

}  // namespace keel
