#pragma once
// A fixed set of worker threads that run one parallel loop at a time. The calling thread takes part,
// so a pool of N threads starts N-1 workers. Kernels split their output rows into tasks; each task
// learns which thread runs it so it can use that thread's scratch memory.
#include <condition_variable>
#include <cstddef>
#include <functional>
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
  // are done. thread_index is in [0, size()). Not reentrant: do not call from inside a task.
  void parallel_for(size_t count, const std::function<void(size_t, int)>& task);

 private:
  void worker_loop(int thread_index);
  void run_tasks(int thread_index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(size_t, int)>* task_ = nullptr;
  size_t count_ = 0;
  size_t next_ = 0;
  size_t finished_ = 0;
  size_t generation_ = 0;
  int busy_workers_ = 0;
  bool stopping_ = false;
};

int hardware_threads();

}  // namespace keel
