#include "keel/eval/fidelity.h"

#include <memory>
#include <span>

#include "keel/engine/forward_loop.h"
#include "keel/engine/standalone_sequence.h"
#include "keel/kv/kv_footprint.h"
#include "keel/util/error.h"

namespace keel::eval {
namespace {

// One side of the comparison: its own pool (so no prefix sharing between arms), one sequence,
// and the logits of the chunk that just ran.
struct Lane {
  Lane(const ModelSpec& spec, const kv::KvPolicy& policy, bool rotate, const PreparedPrompt& prompt)
      : cache(spec, static_cast<int64_t>(prompt.ids.size()), policy, rotate) {}

  void run(Transformer& model, std::span<const int32_t> ids, std::span<const chat::Role> roles,
           std::span<const int64_t> rows, int64_t vocab) {
    logits.resize(rows.size() * static_cast<size_t>(vocab));
    forward_tokens(model, cache.sequence(), ids, roles, rows, logits);
  }

  StandaloneSequence cache;
  std::vector<float> logits;  // (rows, vocab)
};

PreparedPrompt prepare(const ServedModel& model, const Transcript& t) {
  try {
    return model.prepare(t.messages, t.tools, false);
  } catch (const Error& e) {
    throw Error("transcript '" + t.name + "': " + e.what());
  }
}

}  // namespace

size_t distance_bucket(int64_t tokens_before_end) {
  size_t b = 0;
  while (b + 1 < kDistanceBucketCount && tokens_before_end >= kDistanceBucketStarts[b + 1]) ++b;
  return b;
}

std::string distance_bucket_name(size_t bucket) {
  if (bucket + 1 >= kDistanceBucketCount) return std::to_string(kDistanceBucketStarts.back()) + "+";
  return std::to_string(kDistanceBucketStarts[bucket]) + "-" + std::to_string(kDistanceBucketStarts[bucket + 1] - 1);
}

int64_t fidelity_steps(const ServedModel& model, const std::vector<Transcript>& transcripts, int64_t chunk) {
  int64_t steps = 0;
  for (const Transcript& t : transcripts) {
    const int64_t n = static_cast<int64_t>(prepare(model, t).ids.size());
    steps += (n + chunk - 1) / chunk;
  }
  return steps;
}

FidelityResult run_fidelity(ServedModel& reference, ServedModel& model, const std::vector<Transcript>& transcripts,
                            const std::vector<PolicyArm>& arms, const FidelityOptions& options) {
  if (arms.empty()) throw Error("fidelity: no KV policy to compare");
  if (options.chunk < 1) throw Error("fidelity: chunk must be >= 1");
  const ModelSpec& spec = model.weights().spec;
  if (reference.weights().spec.vocab_size != spec.vocab_size)
    throw Error("fidelity: the baseline weights have a different vocabulary size");
  const int64_t vocab = spec.vocab_size;

  FidelityResult result;
  for (const PolicyArm& a : arms) result.arms.push_back(ArmFidelity{a, 0, {}, {}, {}, {}});
  std::vector<double> kv_bytes(arms.size(), 0);
  int64_t total_tokens = 0;

  for (const Transcript& t : transcripts) {
    const PreparedPrompt prompt = prepare(model, t);
    if (&reference != &model && prepare(reference, t).ids != prompt.ids)
      throw Error("transcript '" + t.name + "': the baseline model tokenizes it differently");
    const int64_t n = static_cast<int64_t>(prompt.ids.size());
    if (n < 2) continue;
    result.prompt_lengths.push_back(n);
    total_tokens += n;

    Lane ref_lane(reference.weights().spec, kv::KvPolicy(), options.rotate, prompt);
    std::vector<std::unique_ptr<Lane>> lanes;
    for (size_t a = 0; a < arms.size(); ++a) {
      lanes.push_back(std::make_unique<Lane>(spec, arms[a].policy, options.rotate, prompt));
      kv_bytes[a] += static_cast<double>(kv::kv_sequence_bytes(spec, arms[a].policy, prompt.roles));
    }

    const std::span<const int32_t> ids(prompt.ids);
    const std::span<const chat::Role> roles(prompt.roles);
    std::vector<int64_t> rows;
    for (int64_t at = 0; at < n; at += options.chunk) {
      const int64_t len = std::min(options.chunk, n - at);
      rows.resize(static_cast<size_t>(len));
      for (int64_t r = 0; r < len; ++r) rows[static_cast<size_t>(r)] = r;
      const auto chunk_ids = ids.subspan(static_cast<size_t>(at), static_cast<size_t>(len));
      const auto chunk_roles = roles.subspan(static_cast<size_t>(at), static_cast<size_t>(len));
      ref_lane.run(reference.transformer(), chunk_ids, chunk_roles, rows, vocab);
      for (auto& lane : lanes) lane->run(model.transformer(), chunk_ids, chunk_roles, rows, vocab);

      // Row r predicts the token at position at + r + 1; the last position predicts nothing known.
      for (int64_t r = 0; r < len && at + r + 1 < n; ++r) {
        const RoleGroup group = role_group(prompt.roles[static_cast<size_t>(at + r + 1)]);
        const size_t bucket = distance_bucket(n - 1 - (at + r + 1));
        const std::span<const float> ref_row(ref_lane.logits.data() + r * vocab, static_cast<size_t>(vocab));
        for (size_t a = 0; a < lanes.size(); ++a) {
          const std::span<const float> arm_row(lanes[a]->logits.data() + r * vocab, static_cast<size_t>(vocab));
          const PositionDivergence d = compare_logits(ref_row, arm_row);
          result.arms[a].overall.add(d);
          result.arms[a].by_group[static_cast<size_t>(group)].add(d);
          result.arms[a].by_distance[bucket].add(d);
          if (group == RoleGroup::tool_call) result.arms[a].tool_call_by_distance[bucket].add(d);
        }
      }
      if (options.on_step) options.on_step(t.name);
    }
  }
  for (size_t a = 0; a < arms.size(); ++a)
    result.arms[a].kv_bytes_per_token = total_tokens > 0 ? kv_bytes[a] / static_cast<double>(total_tokens) : 0;
  return result;
}

}  // namespace keel::eval
