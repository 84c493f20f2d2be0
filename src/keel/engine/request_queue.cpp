#include "keel/engine/request_queue.h"

namespace keel {

RequestQueue::RequestQueue(size_t max_waiting) : max_waiting_(max_waiting), thread_([this] { worker(); }) {}

RequestQueue::~RequestQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

bool RequestQueue::submit(std::function<void()> job) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || jobs_.size() >= max_waiting_) return false;
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
  return true;
}

size_t RequestQueue::waiting() const {
  std::lock_guard lock(mutex_);
  return jobs_.size();
}

bool RequestQueue::busy() const {
  std::lock_guard lock(mutex_);
  return busy_;
}

void RequestQueue::worker() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (stopping_) {
      jobs_.clear();
      return;
    }
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    busy_ = true;
    lock.unlock();
    job();  // jobs report their own failures; nothing may escape into the engine thread
    job = nullptr;
    lock.lock();
    busy_ = false;
  }
}

}  // namespace keel
