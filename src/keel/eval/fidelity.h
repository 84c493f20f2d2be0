#pragma once
// Fidelity mode: teacher-forced comparison of next-token distributions. Every transcript is
// rendered and tokenized once, then run through a reference arm (full bf16 cache, on the
// reference weights) and one arm per KV policy (on the model's weights) in lockstep, chunk by
// chunk, so at most one chunk of logits per arm is held at a time. At every position the arm's
// distribution is compared with the reference's (KL(reference || arm), top-1), and the result is
// filed under the role of the token being predicted.
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "keel/engine/served_model.h"
#include "keel/eval/divergence.h"
#include "keel/eval/policy_arms.h"
#include "keel/eval/role_groups.h"
#include "keel/eval/transcripts.h"

namespace keel::eval {

struct FidelityOptions {
  int64_t chunk = 128;  // tokens per forward pass (and per logits buffer)
  bool rotate = true;   // Walsh-Hadamard rotation below 8 bits
  std::function<void(const std::string&)> on_step;  // after each chunk of each transcript
};

struct ArmFidelity {
  PolicyArm arm;
  double kv_bytes_per_token = 0;  // pool bytes per token over the transcripts' real roles
  DivergenceStats overall;
  std::array<DivergenceStats, kRoleGroupCount> by_group;
};

struct FidelityResult {
  std::vector<ArmFidelity> arms;
  std::vector<int64_t> prompt_lengths;  // tokens per transcript
};

// Forward passes needed for `transcripts` (for a progress bar): chunks over all transcripts.
int64_t fidelity_steps(const ServedModel& model, const std::vector<Transcript>& transcripts, int64_t chunk);

// `reference` may be the same object as `model` (KV-only comparison) or another weight format of
// the same model (--weights-baseline); both must tokenize every transcript identically.
// Throws keel::Error on a bad transcript or a tokenizer mismatch.
FidelityResult run_fidelity(ServedModel& reference, ServedModel& model, const std::vector<Transcript>& transcripts,
                            const std::vector<PolicyArm>& arms, const FidelityOptions& options);

}  // namespace keel::eval
