#pragma once
// What `keel serve` runs with, decided before anything loads: the plan `keel plan` prints, the KV
// policy, the pool's size, the default number of turns at once and what is left for preparing
// requests. cmd_serve reads its flags into a ServingRequest and logs the result; the arithmetic
// lives here, beside the plan it extends. Pure functions of files and numbers: any thread.
#include <cstdint>
#include <optional>
#include <string>

#include "keel/kv/kv_policy.h"
#include "keel/plan/planner.h"

namespace keel::plan {

// The context serve reserves when none is asked for: the model's own limit, capped so that a
// long-context model does not claim all memory for tokens a local session rarely reaches.
inline constexpr int64_t kDefaultServeContext = 32768;
// The default --parallel: as many turns as the pool holds conversations of this many tokens, 2 to 8.
inline constexpr int64_t kTokensPerParallelTurn = 4096;

struct ServingRequest {
  PlanRequest plan;                    // memory_gib, context (policy is set from kv_policy)
  std::string kv_policy = "auto";      // a preset name, or a policy spec (kv::KvPolicy::parse)
  std::optional<double> kv_memory_gib;  // --kv-memory: the pool's size, instead of what is left
  int64_t prefill_chunk = 512;         // tokens of the largest pass (the scheduler's chunk)
};

struct ServingBudget {
  Plan plan;
  kv::KvPolicy policy;
  std::string policy_origin;            // why this policy, for the log
  int64_t kv_budget_bytes = 0;          // the KV pool
  int64_t default_parallel = 0;         // turns at once when --parallel is not given
  uint64_t preparation_budget_bytes = 0;  // the ceiling less weights, pool and scratch
};

// Throws keel::Error, with the reason and what to change, when the model and context cannot be
// served: `auto` takes the most precise preset that fits; a named preset or a spec must fit by
// itself; the pool must hold at least one whole context at its peak.
ServingBudget serving_budget(const arch::ModelSource& model, ServingRequest request);

}  // namespace keel::plan
