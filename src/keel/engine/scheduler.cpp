#include "keel/engine/scheduler.h"

#include <algorithm>

#include "keel/util/error.h"

namespace keel {

struct Scheduler::Entry {
  TurnJob job;
  std::unique_ptr<Turn> turn;  // once admitted; kept while preempted
  bool retired = false;        // done() was called: leaves running_ after the step
};

namespace {

SchedulerOptions checked(SchedulerOptions o) {
  if (o.parallel < 1) throw Error("the scheduler needs at least one running turn (parallel)");
  if (o.prefill_chunk < 1 || o.prefill_tokens_when_shared < 1)
    throw Error("the prefill chunk must be at least one token");
  // Every decoding turn gets its token, and a prefill still moves in the same step.
  o.step_tokens = std::max<int64_t>(o.step_tokens, static_cast<int64_t>(o.parallel) + 1);
  return o;
}

}  // namespace

Scheduler::Scheduler(ServedModel& model, SessionCache& session, SchedulerOptions options)
    : model_(model), session_(session), options_(checked(options)), thread_([this] { run(); }) {}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

bool Scheduler::submit(TurnJob job) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || waiting_.size() >= options_.max_waiting) return false;
    auto entry = std::make_unique<Entry>();
    entry->job = std::move(job);
    waiting_.push_back(std::move(entry));
    stats_.waiting = waiting_.size();
  }
  wake_.notify_one();
  return true;
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void Scheduler::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    // A background turn that waits while another runs is picked up again when that one ends.
    wake_.wait(lock, [&] { return stopping_ || !waiting_.empty() || !running_.empty(); });
    if (stopping_) break;
    // A preempted turn waits until a running one has finished and given its memory back.
    std::vector<std::unique_ptr<Entry>> arrived;
    while (!admission_blocked_ && running_.size() + arrived.size() < options_.parallel) {
      const auto next = next_to_admit(arrived);
      if (next == waiting_.end()) break;
      arrived.push_back(std::move(*next));
      waiting_.erase(next);
    }
    lock.unlock();
    admit(arrived);
    drop_unrunnable_waiting();
    yield_background();
    if (!running_.empty()) step();
    if (running_.empty()) admission_blocked_ = false;
    lock.lock();
    stats_.waiting = waiting_.size();
    stats_.running = running_.size();
    stats_.live_sequences = session_.live_count();
  }
  // Stopping: nothing more runs.
  std::deque<std::unique_ptr<Entry>> waiting = std::move(waiting_);
  lock.unlock();
  for (auto& e : running_) finish(*e, nullptr);
  running_.clear();
  for (auto& e : waiting) finish(*e, nullptr);
}

std::deque<std::unique_ptr<Scheduler::Entry>>::iterator Scheduler::next_to_admit(
    const std::vector<std::unique_ptr<Entry>>& arrived) {
  const auto foreground = [](const std::unique_ptr<Entry>& e) { return !e->job.background; };
  const auto next = std::find_if(waiting_.begin(), waiting_.end(), foreground);
  if (next != waiting_.end() || waiting_.empty()) return next;
  // Only background turns wait: one at a time, and only on an otherwise idle engine.
  if (!running_.empty() || !arrived.empty()) return waiting_.end();
  return waiting_.begin();
}

void Scheduler::yield_background() {
  const auto background = [](const std::unique_ptr<Entry>& e) { return e->job.background && !e->retired; };
  if (std::none_of(running_.begin(), running_.end(), background)) return;
  bool other = std::any_of(running_.begin(), running_.end(), [](const auto& e) { return !e->job.background; });
  if (!other) {
    std::lock_guard lock(mutex_);
    other = std::any_of(waiting_.begin(), waiting_.end(), [](const auto& e) { return !e->job.background; });
  }
  if (!other) return;
  std::vector<std::unique_ptr<Entry>> yielded;
  for (auto& e : running_)
    if (background(e)) {
      e->turn->suspend();  // its complete blocks go to the prefix cache, where the other turn finds them
      yielded.push_back(std::move(e));
    }
  std::erase(running_, nullptr);
  std::lock_guard lock(mutex_);
  for (auto& e : yielded) waiting_.push_back(std::move(e));
  stats_.background_yields += static_cast<int64_t>(yielded.size());
}

void Scheduler::admit(std::vector<std::unique_ptr<Entry>>& arrived) {
  for (size_t i = 0; i < arrived.size(); ++i) {
    std::unique_ptr<Entry>& e = arrived[i];
    if (e->job.runnable && !e->job.runnable()) {
      finish(*e, nullptr);
      continue;
    }
    try {
      if (!e->turn)
        e->turn = std::make_unique<Turn>(model_, session_, *e->job.prompt, e->job.options, e->job.emit, e->job.affinity);
      start_turn(*e->turn);
      running_.push_back(std::move(e));
    } catch (const CapacityError&) {
      if (running_.empty()) {
        finish(*e, std::current_exception());
        continue;
      }
      // No room while others run: this one and those after it wait for memory.
      std::lock_guard lock(mutex_);
      for (size_t j = arrived.size(); j > i; --j) waiting_.push_front(std::move(arrived[j - 1]));
      admission_blocked_ = true;
      return;
    } catch (...) {
      finish(*e, std::current_exception());
    }
  }
}

void Scheduler::start_turn(Turn& turn) {
  while (true) {
    try {
      turn.start();
      return;
    } catch (const CapacityError&) {
      // Idle live sequences go before a turn waits or fails for room, as in relieve_memory.
      if (!session_.evict_idle()) throw;
      std::lock_guard lock(mutex_);
      ++stats_.idle_evictions;
    }
  }
}

void Scheduler::drop_unrunnable_waiting() {
  std::vector<std::unique_ptr<Entry>> dropped;
  {
    std::lock_guard lock(mutex_);
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if ((*it)->job.runnable && !(*it)->job.runnable()) {
        dropped.push_back(std::move(*it));
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& e : dropped) finish(*e, nullptr);
}

void Scheduler::step() {
  int64_t budget = options_.step_tokens;
  std::vector<SequencePass> batch;
  std::vector<Entry*> members;
  auto take = [&](Entry& e, int64_t most) {
    const std::optional<SequencePass> segment = e.turn->next_segment(most);
    if (!segment) return finish(e, nullptr);  // cancelled
    batch.push_back(*segment);
    members.push_back(&e);
    budget -= static_cast<int64_t>(segment->tokens.size());
  };
  // One token for every decoding turn, then prefill chunks, shortest first (arrival order among
  // equals), while the budget lasts.
  std::vector<Entry*> prefilling;
  for (auto& e : running_) {
    if (e->turn->pending_tokens() <= 1) take(*e, 1);
    else prefilling.push_back(e.get());
  }
  std::stable_sort(prefilling.begin(), prefilling.end(),
                   [](const Entry* a, const Entry* b) { return a->turn->pending_tokens() < b->turn->pending_tokens(); });
  if (running_.size() > 1) budget = std::min(budget, options_.prefill_tokens_when_shared);
  for (Entry* e : prefilling) {
    if (budget <= 0) break;
    take(*e, std::min(options_.prefill_chunk, budget));
  }

  if (!batch.empty()) {
    bool ran = false;
    try {
      // A full pool is found before the pass (run_pass), where the scheduler can make room.
      run_pass(model_.transformer(), batch);
      ran = true;
    } catch (const CapacityError&) {
      relieve_memory(std::current_exception());
    } catch (...) {
      // Not about one turn's memory (a bug, or an input the pass refused): every turn in it fails.
      const std::exception_ptr error = std::current_exception();
      for (Entry* m : members) finish(*m, error);
    }
    if (ran) {
      for (Entry* m : members) {
        try {
          m->turn->after_pass();
          if (!m->job.followers.empty() && m->turn->prefilled()) release_followers(*m, nullptr);
          if (m->turn->done()) finish(*m, nullptr);
        } catch (...) {
          finish(*m, std::current_exception());
        }
      }
      std::lock_guard lock(mutex_);
      ++stats_.steps;
      stats_.step_turns += static_cast<int64_t>(members.size());
      stats_.largest_batch = std::max(stats_.largest_batch, static_cast<int64_t>(members.size()));
      for (const SequencePass& s : batch) stats_.step_tokens += static_cast<int64_t>(s.tokens.size());
    }
  }
  const size_t before = running_.size();
  std::erase_if(running_, [](const std::unique_ptr<Entry>& e) { return e->retired; });
  if (running_.size() < before) admission_blocked_ = false;  // memory came back
}

void Scheduler::relieve_memory(std::exception_ptr capacity_error) {
  if (session_.evict_idle()) {
    std::lock_guard lock(mutex_);
    ++stats_.idle_evictions;
    return;
  }
  std::vector<Entry*> live;
  for (auto& e : running_)
    if (!e->retired) live.push_back(e.get());
  if (live.size() <= 1) {
    // Alone with nothing left to free: it cannot run in this pool.
    for (Entry* e : live) finish(*e, capacity_error);
    return;
  }
  // The turn admitted last waits again, holding nothing; the others go on.
  auto victim = std::find_if(running_.rbegin(), running_.rend(), [](const auto& e) { return !e->retired; });
  (*victim)->turn->suspend();
  std::unique_ptr<Entry> entry = std::move(*victim);
  running_.erase(std::next(victim).base());
  std::lock_guard lock(mutex_);
  waiting_.push_front(std::move(entry));
  admission_blocked_ = true;
  ++stats_.preemptions;
}

void Scheduler::finish(Entry& entry, std::exception_ptr error) {
  if (entry.retired) return;
  entry.retired = true;
  TurnResult result;
  if (entry.turn && entry.turn->done()) {
    result = entry.turn->result();
  } else {
    if (entry.turn) result = entry.turn->result();
    result.finish = TurnFinish::Cancelled;
  }
  if (result.stats.prompt_tokens == 0) result.stats.prompt_tokens = static_cast<int64_t>(entry.job.prompt->ids.size());
  release_followers(entry, error);
  entry.turn.reset();  // its sequence goes back to the session
  try {
    if (entry.job.done) entry.job.done(std::move(result), error);
  } catch (...) {
    // A callback that throws has nobody to tell; the engine thread goes on.
  }
}

void Scheduler::release_followers(Entry& leader, std::exception_ptr error) {
  std::vector<TurnJob> followers = std::move(leader.job.followers);
  leader.job.followers.clear();
  if (followers.empty()) return;
  if (!error && leader.turn && leader.turn->started()) leader.turn->share_prompt();
  std::unique_lock lock(mutex_);
  if (!error && !stopping_) {
    for (auto it = followers.rbegin(); it != followers.rend(); ++it) {
      auto entry = std::make_unique<Entry>();
      entry->job = std::move(*it);
      waiting_.push_front(std::move(entry));
    }
    stats_.waiting = waiting_.size();
    return;
  }
  lock.unlock();
  for (TurnJob& job : followers) {
    Entry entry;
    entry.job = std::move(job);
    finish(entry, error);
  }
}

}  // namespace keel
