#pragma once
// keel bench --parallel N: many turns at once through the step scheduler (engine/scheduler.h).
// Owned by the `keel bench` command; called once, from the command's thread.
#include <cstdint>
#include <string>

#include "keel/kv/kv_policy.h"

namespace keel::cli {

struct ParallelBenchOptions {
  std::string model_dir;
  int threads = 0;  // 0: one per core
  int parallel = 1;  // turns running at once (SchedulerOptions::parallel)
  kv::KvPolicy policy;
  // Decode phase: `parallel` turns submitted together, each a prompt and exactly gen_tokens.
  int64_t prompt_tokens = 256;
  int64_t gen_tokens = 64;
  // Time-to-first-token phase: one long prompt, and short requests arriving while it prefills.
  int64_t long_prompt_tokens = 4096;
  int short_requests = 8;  // 0: no TTFT phase
  int64_t short_prompt_tokens = 32;
  // 1: a short request gives its running slot back with its first token, so the next one's TTFT
  // is not a wait for a slot an earlier short holds (each decoded token costs a whole step, and a
  // step with a long prefill chunk is slow).
  int64_t short_gen_tokens = 1;
  int64_t short_interval_ms = 2000;  // between arrivals, the first one interval after the long prompt
};

// Runs both phases and prints their rows. Throws keel::Error (a model without a tokenizer, ...).
void bench_parallel(const ParallelBenchOptions& options);

}  // namespace keel::cli
