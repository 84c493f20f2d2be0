#pragma once
// Task mode: every case of a suite through the real serving path (run_turn: prefix reuse, prefill,
// decode, tool-call parsing, schema validation, retries), arm by arm. An arm is a KV policy with
// cache reuse on (one long-lived SessionCache for the whole arm, cases in sequence as a client
// session would send them) or off (a fresh SessionCache per request: the ground truth). Each run
// samples with its own seed; a case's outcome is compared with the bf16 ("full") arm's outcome
// for the same run and reuse mode.
//
// Threads: run_tasks runs every forward pass on the calling thread, which must own `model` for the
// call (one call per model at a time), and calls options.on_step there. The other functions are
// pure and the results plain values: any thread.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "keel/engine/served_model.h"
#include "keel/eval/policy_arms.h"
#include "keel/eval/task_suite.h"

namespace keel::eval {

struct TaskOptions {
  int runs = 3;
  uint64_t seed = 1;           // run r uses seed + r
  double temperature = 0.3;    // > 0 so that runs with different seeds can differ
  double top_p = 0.95;
  int64_t max_tokens = 160;
  int tool_retries = 2;
  bool rotate = true;
  // Tool calls decoded under their schemas' grammars (engine/output_constraint.h), as keel serve
  // does with --constrained-tool-calls on.
  bool constrained = false;
  std::function<void(const std::string&)> on_step;  // after each case
};

struct CaseRun {
  size_t case_index = 0;
  int run = 0;
  uint64_t seed = 0;              // the sampler's seed for this case in this run
  bool called = false;
  ObservedCall call;              // the first valid call
  bool pass = false;
  std::string reason;             // why it failed
  int64_t empty_argument_calls = 0;
  int64_t invalid_calls = 0;
  int64_t retries = 0;
  int64_t output_tokens = 0;      // every token generated, retried ones included
  int64_t prompt_tokens = 0;
  int64_t reused_tokens = 0;
  std::string text;               // text the model wrote besides calls
  bool flip = false;              // outcome differs from the full arm's (same run, same reuse)
};

struct TaskArmResult {
  PolicyArm arm;
  bool reuse = true;
  double kv_bytes_per_token = 0;  // over the suite's real prompt roles
  std::vector<CaseRun> runs;      // cases x runs, run-major

  int64_t passes() const;
  int64_t empty_argument_calls() const;
  int64_t invalid_calls() const;
  int64_t retries() const;
  int64_t flips() const;
  int64_t reused_tokens() const;
  int64_t output_tokens() const;
  int64_t prompt_tokens() const;
  double pass_rate() const;
};

struct TaskResult {
  std::vector<TaskArmResult> arms;
  std::vector<int64_t> prompt_lengths;  // tokens per case prompt
  std::vector<uint64_t> run_seeds;
};

// The seed of case `case_index` in run `run`: distinct per case, the same in every arm.
uint64_t case_seed(uint64_t base_seed, int run, size_t case_index);

// The outcome in one comparable string: the first call's name and arguments, or its absence.
std::string outcome_signature(const CaseRun& r);

// Arms: every policy x every reuse mode in `reuse_modes`. The full arm is added when `policies`
// lacks it (flips are measured against it). Throws keel::Error on bad options.
TaskResult run_tasks(ServedModel& model, const TaskSuite& suite, const std::vector<PolicyArm>& policies,
                     const std::vector<bool>& reuse_modes, const TaskOptions& options);

// Cases x runs x arms, for a progress bar.
int64_t task_steps(const TaskSuite& suite, size_t policies, size_t reuse_modes, int runs);

}  // namespace keel::eval
