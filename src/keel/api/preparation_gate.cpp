#include "keel/api/preparation_gate.h"

#include <algorithm>

#include "keel/util/heap.h"

namespace keel::api {
namespace {

// A preparation this large hands its freed memory back to the OS when it ends (util/heap.h):
// malloc keeps freed small blocks in its arenas otherwise, and a burst of large bodies would leave
// the process near its peak. Below it, trimming would cost more than it returns.
constexpr size_t kTrimAboveBytes = 16u << 20;

}  // namespace

size_t preparation_cost(size_t body_bytes) {
  return std::max(kPreparationMinBytes, body_bytes * kPreparationBytesPerBodyByte);
}

size_t effective_preparation_budget(size_t budget_bytes, size_t max_body_bytes) {
  return std::max(budget_bytes, preparation_cost(max_body_bytes));
}

PreparationGate::PreparationGate(size_t budget_bytes, size_t max_body_bytes)
    : budget_(effective_preparation_budget(budget_bytes, max_body_bytes)) {}

PreparationGate::Ticket::Ticket(Ticket&& other) noexcept : gate_(other.gate_), serial_(other.serial_) {
  other.gate_ = nullptr;
}

PreparationGate::Ticket::~Ticket() {
  if (gate_) gate_->release(serial_);
}

bool PreparationGate::may_enter_locked(uint64_t serial, size_t cost) const {
  if (used_ + cost > budget_) return false;
  const auto& [oldest, oldest_cost] = *waiting_.begin();
  if (oldest == serial) return true;
  // Passing the oldest waiter: only into room it cannot use yet, while what was admitted before
  // it arrived still keeps it out.
  size_t held_before_oldest = 0;
  for (auto it = held_.begin(); it != held_.end() && it->first < oldest; ++it) held_before_oldest += it->second;
  return budget_ - held_before_oldest < oldest_cost;
}

std::optional<PreparationGate::Ticket> PreparationGate::enter(size_t body_bytes, std::chrono::milliseconds timeout) {
  const size_t cost = std::min(preparation_cost(body_bytes), budget_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock lock(mutex_);
  const uint64_t me = next_caller_++;
  waiting_.emplace(me, cost);
  const bool admitted = freed_.wait_until(lock, deadline, [&] { return may_enter_locked(me, cost); });
  waiting_.erase(me);
  // Others may be able to go now: after a share was taken there may be room left, after a timeout
  // another waiter is the oldest.
  freed_.notify_all();
  if (!admitted) return std::nullopt;
  used_ += cost;
  held_.emplace(me, cost);
  return Ticket(this, me);
}

void PreparationGate::release(uint64_t serial) {
  size_t cost = 0;
  {
    std::lock_guard lock(mutex_);
    const auto it = held_.find(serial);
    cost = it->second;
    used_ -= cost;
    held_.erase(it);
  }
  freed_.notify_all();
  if (cost >= kTrimAboveBytes) release_freed_heap();
}

size_t PreparationGate::used_bytes() const {
  std::lock_guard lock(mutex_);
  return used_;
}

size_t PreparationGate::waiting() const {
  std::lock_guard lock(mutex_);
  return waiting_.size();
}

}  // namespace keel::api
