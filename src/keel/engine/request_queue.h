#pragma once
// The engine runs one request at a time on its own thread; HTTP threads queue work here. The
// queue is bounded so that a flood of clients gets "overloaded" at once instead of waiting forever.
//
// Threads: submit(), waiting(), busy() and max_waiting() may be called from any thread (one mutex).
// Jobs run one at a time, in the order submitted, on the queue's own thread, which is therefore
// "the engine thread": everything a job touches that HTTP threads do not lock is engine-only. A
// job must catch its own exceptions (one that escapes ends the process) and must not destroy
// the queue.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace keel {

class RequestQueue {
 public:
  explicit RequestQueue(size_t max_waiting);
  ~RequestQueue();  // finishes the running job, drops the waiting ones (their destructors run)
  RequestQueue(const RequestQueue&) = delete;
  RequestQueue& operator=(const RequestQueue&) = delete;

  // False when max_waiting jobs are already waiting: the caller answers "overloaded".
  bool submit(std::function<void()> job);

  size_t waiting() const;
  bool busy() const;
  size_t max_waiting() const { return max_waiting_; }

 private:
  void worker();

  const size_t max_waiting_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace keel
