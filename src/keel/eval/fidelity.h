#pragma once
// Fidelity mode: teacher-forced comparison of next-token distributions. Every transcript is
// rendered and tokenized once, then run through a reference arm (full bf16 cache, on the
// reference weights) and one arm per KV policy (on the model's weights) in lockstep, chunk by
// chunk, so at most one chunk of logits per arm is held at a time. At every position the arm's
// distribution is compared with the reference's (KL(reference || arm), top-1), and the result is
// filed under the role of the token being predicted.
//
// Threads: run_fidelity runs every forward pass, of `reference` and of `model`, on the calling
// thread, which must own both for the call, and calls options.on_step there. fidelity_steps only
// renders and tokenizes (ServedModel's const members) and the bucket functions are pure: any thread.
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

// Where a predicted token sits, counted back from its transcript's last token: the history far
// back is what a quantizing policy stores below bf16 (everything past its recent window), so
// these buckets show whether errors come with distance. Bucket i holds distances
// [kDistanceBucketStarts[i], kDistanceBucketStarts[i + 1]).
inline constexpr std::array<int64_t, 5> kDistanceBucketStarts = {0, 256, 1024, 4096, 16384};
constexpr size_t kDistanceBucketCount = kDistanceBucketStarts.size();
size_t distance_bucket(int64_t tokens_before_end);
std::string distance_bucket_name(size_t bucket);  // "0-255", "256-1023", ..., "16384+"

struct ArmFidelity {
  PolicyArm arm;
  double kv_bytes_per_token = 0;  // pool bytes per token over the transcripts' real roles
  DivergenceStats overall;
  std::array<DivergenceStats, kRoleGroupCount> by_group;
  std::array<DivergenceStats, kDistanceBucketCount> by_distance = {};
  // tool_call positions only, by distance (the calls late in a long session read the most
  // quantized history).
  std::array<DivergenceStats, kDistanceBucketCount> tool_call_by_distance = {};
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
