#pragma once
// Bounds the memory of requests being prepared. Parsing a body, rendering it through the chat
// template and tokenizing it costs a multiple of the body's size (docs/serve.md, "Limits and
// security"), and it runs on HTTP workers before the engine queue, so without a bound eight large
// bodies at once take gigabytes. Each request holds a share of one byte budget, sized at start
// from the plan (what the ceiling leaves after weights, KV pool and scratch), for as long as it is
// prepared; a request whose share is not free waits, and gets "overloaded" if the wait passes a
// deadline.
//
// Who goes first: the oldest waiter, when its share is free. A later request whose share fits may
// pass it only while the oldest could not go anyway, because the requests admitted before it
// arrived still hold too much: once those have given back enough, later requests wait behind it.
// So one client's large bodies do not hold up every small request behind them, and a stream of
// small requests cannot starve a large one (it waits at most for what was held when it arrived,
// plus what passed it before that was given back).
//
// When a large preparation ends its memory is handed back to the OS (malloc_trim), so a burst of
// large bodies does not leave the process holding its peak.
//
// Threads: every method may be called from any thread (one mutex); a Ticket is released on the
// thread that holds it.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <map>

namespace keel::api {

// Peak bytes one request's preparation may take per byte of its body: the worst we measured, a
// body of digits, which the pre-tokenizer cuts into one word per byte (122x; source code is about
// 15-19x). docs/serve.md has the figures and how they were measured.
inline constexpr size_t kPreparationBytesPerBodyByte = 128;
// What any request costs at least, so a flood of empty bodies is bounded too.
inline constexpr size_t kPreparationMinBytes = 64 << 10;

// The share of the budget a body of `body_bytes` takes.
size_t preparation_cost(size_t body_bytes);
// The budget a gate keeps for `budget_bytes`: at least one largest body's cost, so every body the
// HTTP layer admits can be prepared.
size_t effective_preparation_budget(size_t budget_bytes, size_t max_body_bytes);

class PreparationGate {
 public:
  // Keeps effective_preparation_budget(budget_bytes, max_body_bytes).
  PreparationGate(size_t budget_bytes, size_t max_body_bytes);
  PreparationGate(const PreparationGate&) = delete;
  PreparationGate& operator=(const PreparationGate&) = delete;

  // Held while one request is prepared; gives its share back when destroyed.
  class Ticket {
   public:
    Ticket(Ticket&& other) noexcept;
    Ticket& operator=(Ticket&&) = delete;
    ~Ticket();

   private:
    friend class PreparationGate;
    Ticket(PreparationGate* gate, uint64_t serial) : gate_(gate), serial_(serial) {}
    PreparationGate* gate_;
    uint64_t serial_;  // the caller's arrival number
  };

  // The share for a body of `body_bytes`, once it is free and the order above lets it go; nullopt
  // when that takes longer than `timeout`.
  std::optional<Ticket> enter(size_t body_bytes, std::chrono::milliseconds timeout);

  size_t budget_bytes() const { return budget_; }
  size_t used_bytes() const;
  size_t waiting() const;

 private:
  void release(uint64_t serial);
  bool may_enter_locked(uint64_t serial, size_t cost) const;

  const size_t budget_;
  mutable std::mutex mutex_;
  std::condition_variable freed_;
  size_t used_ = 0;
  uint64_t next_caller_ = 0;           // numbers the callers of enter() in arrival order
  std::map<uint64_t, size_t> waiting_;  // caller -> its cost, still waiting (oldest first)
  std::map<uint64_t, size_t> held_;     // caller -> its cost, admitted and not yet released
};

}  // namespace keel::api
