#pragma once
// The step scheduler: many turns at once, on one engine thread (vLLM v1's model). Each step spends
// a token budget across the running turns: one token for every turn that is decoding, then
// prefill chunks for the others, shortest first, so a short request is not stuck behind a long
// prompt (and fewer of them while other turns run, so no turn waits long for a step to end). The step's tokens run as one batched forward pass (arch/transformer.h): every weight is
// read once per step for all turns, and each turn gets the logits it would get alone (batch
// invariance), so its tokens do not depend on what runs beside it.
//
// Admission is first come first served up to `parallel` running turns. A background turn (keel
// serve --warm) runs only while no other turn runs or waits: it starts when the engine is idle
// and, as soon as another turn arrives, is suspended (its complete blocks stay cached, so the new
// turn reuses what it prefilled so far) and waits behind it. When the KV pool is full,
// the least recently used idle live sequence is let go first; if none is left, the turn admitted
// last is preempted: its sequence goes back to the pool (complete blocks stay cached) and it waits
// at the head of the queue, to resume with the same tokens. A turn alone that still does not fit
// fails with the pool's CapacityError (overloaded).
//
// Threads: submit(), stats() and max_waiting() from any thread (one mutex). Jobs' callbacks run on
// the scheduler's own thread, "the engine thread", which alone runs the model and touches the
// SessionCache; a callback must not throw (the scheduler catches and drops what escapes).
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "keel/engine/chat_turn.h"
#include "keel/engine/served_model.h"
#include "keel/engine/session_cache.h"

namespace keel {

struct SchedulerOptions {
  size_t parallel = 4;          // turns running at once
  int64_t step_tokens = 512;    // tokens one step runs, decode tokens included
  int64_t prefill_chunk = 256;  // most prompt tokens of one turn in one step
  // Most prompt tokens in a step while other turns run beside: each of them waits for the step
  // (a decoding turn for its next token, a new one for its first), so it stays short, at some
  // cost to a long prompt. Alone, a turn prefills up to step_tokens a step.
  int64_t prefill_tokens_when_shared = 128;
  size_t max_waiting = 64;      // turns that may wait; submit() refuses more
};

// One turn to run. The scheduler owns it from submit() to done().
struct TurnJob {
  std::shared_ptr<const PreparedPrompt> prompt;
  TurnOptions options;  // options.cancelled is looked at before every step
  std::string affinity;  // the key its sequence stays live under (SessionCache)
  std::function<void(TurnEvent&&)> emit;
  // Asked before the turn starts, and of waiting turns every step: false ends it without running
  // (its client left, the server is shutting down). Empty: always runnable.
  std::function<bool()> runnable;
  // Once, on the engine thread: the result, or the exception that ended the turn. A turn that
  // never ran has finish Cancelled and only prompt_tokens set.
  std::function<void(TurnResult, std::exception_ptr)> done;
  // Low priority: runs only when no other turn runs or waits (a warm-up).
  bool background = false;
  // Turns with the same prompt (OpenAI n > 1). They wait until this one's prompt has run, then
  // its complete blocks go to the prefix cache and they queue ahead of every waiting turn, so
  // they reuse the prompt instead of prefilling it again. If this one fails first, so do they.
  std::vector<TurnJob> followers;
};

struct SchedulerStats {
  size_t waiting = 0;
  size_t running = 0;
  size_t live_sequences = 0;  // finished turns' sequences kept for their next turn
  int64_t steps = 0;
  int64_t step_tokens = 0;    // tokens run, summed over steps
  int64_t step_turns = 0;     // turns in a step, summed over steps (/ steps: the mean batch)
  int64_t largest_batch = 0;  // most turns in one step
  int64_t preemptions = 0;
  int64_t idle_evictions = 0;  // live sequences let go for a running turn's memory
  int64_t background_yields = 0;  // background turns suspended for another turn
};

class Scheduler {
 public:
  Scheduler(ServedModel& model, SessionCache& session, SchedulerOptions options);
  // Finishes the step in progress; every turn still waiting or running ends with done()
  // (Cancelled), and the thread stops.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // False when max_waiting turns already wait: the caller answers "overloaded".
  bool submit(TurnJob job);

  SchedulerStats stats() const;
  size_t max_waiting() const { return options_.max_waiting; }
  const SchedulerOptions& options() const { return options_; }

 private:
  struct Entry;  // a job and, once admitted, its Turn

  void run();
  void admit(std::vector<std::unique_ptr<Entry>>& arrived);
  // Turn::start, ending idle live sequences while the pool has no room for it; throws
  // keel::CapacityError when none is left to end.
  void start_turn(Turn& turn);
  void step();
  void finish(Entry& entry, std::exception_ptr error);
  // The leader's prompt has run (or the leader ended): its followers queue first, or end with
  // `error` (and when the scheduler is stopping).
  void release_followers(Entry& leader, std::exception_ptr error);
  void drop_unrunnable_waiting();
  void relieve_memory(std::exception_ptr capacity_error);
  // Suspends the running background turns when any other turn runs or waits.
  void yield_background();
  // Under mutex_: the next waiting turn to admit (a foreground one first; a background one only when
  // nothing else runs, waits or was just admitted), or waiting_.end().
  std::deque<std::unique_ptr<Entry>>::iterator next_to_admit(const std::vector<std::unique_ptr<Entry>>& arrived);

  ServedModel& model_;
  SessionCache& session_;
  const SchedulerOptions options_;

  mutable std::mutex mutex_;  // waiting_, stopping_ and the stats below
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Entry>> waiting_;
  bool stopping_ = false;
  SchedulerStats stats_;
  bool admission_blocked_ = false;  // engine thread: a preempted turn waits for memory to come back

  std::vector<std::unique_ptr<Entry>> running_;  // engine thread only, in admission order
  std::thread thread_;  // last: starts once everything above exists
};

}  // namespace keel
