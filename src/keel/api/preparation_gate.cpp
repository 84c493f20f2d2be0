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

PreparationGate::Ticket::Ticket(Ticket&& other) noexcept : gate_(other.gate_), cost_(other.cost_) {
  other.gate_ = nullptr;
}

PreparationGate::Ticket::~Ticket() {
  if (gate_) gate_->release(cost_);
}

std::optional<PreparationGate::Ticket> PreparationGate::enter(size_t body_bytes, std::chrono::milliseconds timeout) {
  const size_t cost = std::min(preparation_cost(body_bytes), budget_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock lock(mutex_);
  const uint64_t me = next_caller_++;
  waiting_.insert(me);
  const auto my_turn = [&] { return *waiting_.begin() == me && used_ + cost <= budget_; };
  const bool admitted = freed_.wait_until(lock, deadline, my_turn);
  waiting_.erase(me);
  // Whoever is first now may be able to go: after a share was taken there may be room left, after
  // a timeout the one behind the caller that gave up is first.
  freed_.notify_all();
  if (!admitted) return std::nullopt;
  used_ += cost;
  return Ticket(this, cost);
}

void PreparationGate::release(size_t cost) {
  {
    std::lock_guard lock(mutex_);
    used_ -= cost;
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
