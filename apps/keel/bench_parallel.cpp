// keel bench --parallel N: what the step scheduler gives many agents at once. Two phases on one
// Scheduler, the same engine `keel serve` runs:
//
//  1. decode: N turns submitted together, each a synthetic prompt and exactly --gen-tokens tokens.
//     Aggregate decode is every token sampled from the moment all N turns decode, over that time;
//     per-sequence decode is what one turn sees (its tokens after the first over its decode time).
//  2. time to first token: one --long-prompt-tokens prompt, and --short-requests short prompts
//     (of --short-gen-tokens each) arriving one every --short-interval-ms while it prefills;
//     p50/p99 of their time from submission to their first sampled token.
//
// Every turn is greedy and may not end early (end-of-sequence and special tokens are forbidden), so
// each runs exactly its token count whatever the (often random) weights say. Each turn has its own
// prompt and prefix-cache namespace: no turn reuses another's KV, as for distinct agents.
//
// Threads: bench_parallel() on the command's thread; the callbacks of each turn on the scheduler's
// engine thread, which writes only its turn's Probe. The command's thread reads a Probe only after
// its done() was counted under Bench::mutex_.
#include "bench_parallel.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <limits>
#include <mutex>
#include <thread>

#include "keel/arch/model_source.h"
#include "keel/engine/scheduler.h"
#include "keel/engine/served_model.h"
#include "keel/engine/session_cache.h"
#include "keel/kv/kv_footprint.h"
#include "keel/util/error.h"

namespace keel::cli {
namespace {

using Clock = std::chrono::steady_clock;

// The long prompt of the TTFT phase answers this much after its prefill.
constexpr int64_t kLongAnswerTokens = 8;

double seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

std::string describe(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

// What a turn's output may not contain for it to run its whole token count: the end-of-sequence
// ids, special tokens (one that is not output syntax ends the turn, chat_turn.cpp: ends_output),
// and the padding rows past the tokenizer's vocabulary.
std::vector<int32_t> ids_that_end_output(const ServedModel& model) {
  std::vector<int32_t> ids = model.weights().eos_token_ids;
  const text::Tokenizer& tokenizer = model.tokenizer();
  for (int64_t id = 0; id < model.weights().spec.vocab_size; ++id)
    if (static_cast<size_t>(id) >= tokenizer.vocab_size() || tokenizer.is_special(static_cast<int32_t>(id)))
      ids.push_back(static_cast<int32_t>(id));
  return ids;
}

// One turn as the bench sees it.
struct Probe {
  Clock::time_point submitted;
  std::vector<Clock::time_point> samples;  // when each token was sampled: logits ready
  TurnResult result;
  std::string error;  // empty: the turn ended normally
};

// Submits synthetic turns to a Scheduler and waits for them.
class Bench {
 public:
  Bench(ServedModel& model, SessionCache& session, const SchedulerOptions& options)
      : vocab_(std::min<int64_t>(model.weights().spec.vocab_size, static_cast<int64_t>(model.tokenizer().vocab_size()))),
        forbidden_(ids_that_end_output(model)),
        scheduler_(model, session, options) {}

  // A turn of `prompt_tokens` synthetic ids and exactly `gen_tokens` outputs, submitted now.
  const Probe& submit(int64_t prompt_tokens, int64_t gen_tokens) {
    Probe& probe = probes_.emplace_back();
    const auto index = static_cast<int64_t>(probes_.size());
    auto prompt = std::make_shared<PreparedPrompt>();
    for (int64_t i = 0; i < prompt_tokens; ++i)
      prompt->ids.push_back(static_cast<int32_t>((i * 7919 + index * 104729 + 13) % vocab_));
    prompt->roles.assign(prompt->ids.size(), chat::Role::user);
    probe.samples.reserve(static_cast<size_t>(gen_tokens));

    TurnJob job;
    job.prompt = std::move(prompt);
    job.options.max_tokens = gen_tokens;
    job.options.sampling.temperature = 0;
    job.options.cache_salt = static_cast<uint64_t>(index);
    job.options.logits_processor = [this, &probe](std::span<const int32_t>, std::span<float> logits) {
      probe.samples.push_back(Clock::now());
      for (int32_t id : forbidden_) logits[static_cast<size_t>(id)] = -std::numeric_limits<float>::infinity();
    };
    job.emit = [](TurnEvent&&) {};
    job.done = [this, &probe](TurnResult result, std::exception_ptr error) {
      probe.result = std::move(result);
      if (error) probe.error = describe(error);
      {
        std::lock_guard lock(mutex_);
        ++finished_;
      }
      finished_changed_.notify_all();
    };
    probe.submitted = Clock::now();
    if (!scheduler_.submit(std::move(job))) throw Error("the scheduler refused a turn (too many waiting)");
    return probe;
  }

  // Until every submitted turn is done; throws for one that failed or ended short.
  void wait_all() {
    std::unique_lock lock(mutex_);
    finished_changed_.wait(lock, [&] { return finished_ == probes_.size(); });
    for (const Probe& p : probes_) {
      if (!p.error.empty()) throw Error("a turn failed: " + p.error);
      if (p.result.finish != TurnFinish::MaxTokens || p.samples.empty())
        throw Error("a turn ended after " + std::to_string(p.result.stats.output_tokens) +
                    " tokens instead of running all of them");
    }
  }

  SchedulerStats stats() const { return scheduler_.stats(); }

 private:
  const int64_t vocab_;
  const std::vector<int32_t> forbidden_;
  std::mutex mutex_;
  std::condition_variable finished_changed_;
  size_t finished_ = 0;
  std::deque<Probe> probes_;  // a deque: a Probe never moves while the engine thread writes it
  Scheduler scheduler_;       // last: its thread calls back into the members above
};

void decode_phase(Bench& bench, const ParallelBenchOptions& o, double weight_bytes) {
  std::vector<const Probe*> turns;
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < o.parallel; ++i) turns.push_back(&bench.submit(o.prompt_tokens, o.gen_tokens));
  bench.wait_all();
  const Clock::time_point end = Clock::now();
  const SchedulerStats steps = bench.stats();

  // From the moment the last turn starts decoding to the last token sampled: turns prefilled in
  // an earlier step finish at most that step earlier, so this is the rate with all N decoding.
  Clock::time_point all_decoding = start, last_token = start;
  for (const Probe* p : turns) {
    all_decoding = std::max(all_decoding, p->samples.front());
    last_token = std::max(last_token, p->samples.back());
  }
  int64_t tokens_after = 0;
  double per_sequence = 0;
  for (const Probe* p : turns) {
    tokens_after += std::count_if(p->samples.begin(), p->samples.end(), [&](auto t) { return t > all_decoding; });
    // The first token is sampled from the prefill's logits; decode_seconds covers the rest.
    const TurnStats& s = p->result.stats;
    if (s.decode_seconds > 0) per_sequence += static_cast<double>(s.output_tokens - 1) / s.decode_seconds;
  }
  per_sequence /= static_cast<double>(turns.size());
  const double window = seconds(all_decoding, last_token);
  const double aggregate = window > 0 ? static_cast<double>(tokens_after) / window : 0;

  std::printf("wall             %.2f s for %d turns of %lld + %lld tokens; all decoding after %.2f s\n", seconds(start, end),
              o.parallel, static_cast<long long>(o.prompt_tokens), static_cast<long long>(o.gen_tokens),
              seconds(start, all_decoding));
  if (window > 0)
    std::printf("aggregate decode %.2f tok/s (%lld tokens in %.2f s with every turn decoding)\n", aggregate,
                static_cast<long long>(tokens_after), window);
  else
    std::printf("aggregate decode - (every turn's last token came with its first: use --gen-tokens 2 or more)\n");
  std::printf("per-sequence     %.2f tok/s (mean over %d turns of tokens after the first / decode time)\n", per_sequence,
              o.parallel);
  // Each step reads every weight once, whatever its batch: steps/s times the weight bytes.
  const double steps_per_s = aggregate / o.parallel;
  std::printf("steps            %lld, mean batch %.2f turns, largest %lld; decoding %.2f steps/s x %.1f MB = %.2f GB/s of weights\n",
              static_cast<long long>(steps.steps),
              steps.steps ? static_cast<double>(steps.step_turns) / static_cast<double>(steps.steps) : 0.0,
              static_cast<long long>(steps.largest_batch), steps_per_s, weight_bytes / 1e6,
              steps_per_s * weight_bytes / 1e9);
}

// Nearest rank: the smallest value at least q of them do not exceed.
double percentile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

void ttft_phase(Bench& bench, const ParallelBenchOptions& o) {
  const SchedulerStats before = bench.stats();
  const Probe& long_turn = bench.submit(o.long_prompt_tokens, kLongAnswerTokens);
  std::vector<const Probe*> shorts;
  for (int i = 1; i <= o.short_requests; ++i) {
    std::this_thread::sleep_until(long_turn.submitted + std::chrono::milliseconds(o.short_interval_ms * i));
    shorts.push_back(&bench.submit(o.short_prompt_tokens, o.short_gen_tokens));
  }
  bench.wait_all();
  const SchedulerStats after = bench.stats();

  const Clock::time_point long_first = long_turn.samples.front();
  std::vector<double> ttft;
  int during_prefill = 0;
  for (const Probe* p : shorts) {
    ttft.push_back(seconds(p->submitted, p->samples.front()));
    during_prefill += p->submitted < long_first;
  }
  std::printf("ttft setup       a %lld-token prompt, its first token after %.2f s; %d requests of %lld + %lld tokens, "
              "one every %lld ms, %d of them while it prefilled\n",
              static_cast<long long>(o.long_prompt_tokens), seconds(long_turn.submitted, long_first), o.short_requests,
              static_cast<long long>(o.short_prompt_tokens), static_cast<long long>(o.short_gen_tokens),
              static_cast<long long>(o.short_interval_ms), during_prefill);
  // A short request that waits for memory rather than for a slot shows up here.
  std::printf("ttft steps       %lld, mean batch %.2f turns, %lld preemptions, %lld idle sequences let go\n",
              static_cast<long long>(after.steps - before.steps),
              after.steps > before.steps ? static_cast<double>(after.step_turns - before.step_turns) /
                                               static_cast<double>(after.steps - before.steps)
                                         : 0.0,
              static_cast<long long>(after.preemptions - before.preemptions),
              static_cast<long long>(after.idle_evictions - before.idle_evictions));
  std::printf("ttft p50         %.0f ms (submission to first sampled token)\n", percentile(ttft, 0.50) * 1e3);
  std::printf("ttft p99         %.0f ms (nearest rank of %zu)\n", percentile(ttft, 0.99) * 1e3, ttft.size());
}

}  // namespace

void bench_parallel(const ParallelBenchOptions& o) {
  ServedModelOptions model_options;
  model_options.threads = o.threads;
  ServedModel model(arch::resolve_model(o.model_dir), model_options);
  const ModelSpec& spec = model.weights().spec;

  // Room for `parallel` of the largest turn at once, and one more: a pass holds a block leaving
  // the recent window in both forms until it ends, and a finished turn stays live until evicted.
  const int64_t context =
      std::max({o.prompt_tokens + o.gen_tokens, o.long_prompt_tokens + kLongAnswerTokens,
                o.short_prompt_tokens + o.short_gen_tokens}) + 1;
  const int64_t budget = kv::kv_context_bytes(spec, o.policy, context) * (o.parallel + 1);
  SessionCache session(spec, budget, o.policy, true, context);
  SchedulerOptions scheduler;
  scheduler.parallel = static_cast<size_t>(o.parallel);
  scheduler.max_waiting = static_cast<size_t>(o.parallel + o.short_requests + 1);
  Bench bench(model, session, scheduler);

  std::printf("parallel         %d turns at once (greedy, never ending early), KV %s, %d threads, step %lld tokens, "
              "prefill chunk %lld\n",
              o.parallel, o.policy.describe().c_str(), model.threads(), static_cast<long long>(scheduler.step_tokens),
              static_cast<long long>(scheduler.prefill_chunk));
  decode_phase(bench, o, static_cast<double>(model.weights().decode_bytes().active));
  if (o.short_requests > 0) ttft_phase(bench, o);
}

}  // namespace keel::cli
