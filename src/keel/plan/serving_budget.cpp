#include "keel/plan/serving_budget.h"

#include <algorithm>

#include "keel/arch/model_loader.h"
#include "keel/kv/kv_footprint.h"
#include "keel/plan/kv_presets.h"
#include "keel/plan/number_format.h"
#include "keel/util/error.h"

namespace keel::plan {
namespace {

bool is_preset_name(const std::string& text) {
  for (KvPreset p : {KvPreset::Auto, KvPreset::Full, KvPreset::Int8, KvPreset::Int4, KvPreset::Protect,
                     KvPreset::ProtectKeys})
    if (kv_preset_name(p) == text) return true;
  return false;
}

}  // namespace

ServingBudget serving_budget(const arch::ModelSource& model, ServingRequest request) {
  PlanRequest& pr = request.plan;
  const bool preset = is_preset_name(request.kv_policy);
  pr.policy = preset ? parse_kv_preset(request.kv_policy) : KvPreset::Full;
  const kv::KvPolicy explicit_policy = preset ? kv::KvPolicy() : kv::KvPolicy::parse(request.kv_policy);

  Plan p = plan_model(model, pr);
  if (!pr.context && p.max_context && *p.max_context > kDefaultServeContext) {
    pr.context = kDefaultServeContext;
    p = plan_model(model, pr);
  }
  const ModelSpec spec = arch::runnable_spec(model);
  // Positions past the model's limit were never trained (and its RoPE tables end there): a context
  // beyond it would accept conversations the model cannot read.
  if (pr.context && *pr.context > spec.max_position)
    throw Error("--context " + std::to_string(*pr.context) + " is more than the model's max_position_embeddings (" +
                std::to_string(spec.max_position) + ", " + p.config_path.string() + "); use --context " +
                std::to_string(spec.max_position) + " or less");

  ServingBudget out{p, kv::KvPolicy(), "", 0, 0, 0};
  if (preset) {
    require_fit(p);
    out.policy = kv::KvPolicy::preset(*p.chosen);
    out.policy_origin = pr.policy == KvPreset::Auto
                            ? "auto: the most precise preset that fits is " + std::string(kv_preset_name(*p.chosen))
                            : "--kv-policy " + request.kv_policy;
  } else {
    if (!p.weights.bytes) throw Error("cannot check the fit, the weight bytes are unknown: " + p.weights.bytes_source);
    out.policy = explicit_policy;
    out.policy_origin = "--kv-policy " + request.kv_policy;
  }

  // The pool gets what is left under the ceiling, up to what a full-precision context needs (more
  // room than one context keeps other conversations' prefixes cached), and at least the policy's
  // own need for one context.
  const auto left = static_cast<int64_t>(kv_budget_bytes(p).value_or(0));
  const auto full_bytes =
      static_cast<int64_t>(kv::kv_bytes_per_token(spec, kv::KvPolicy(), p.context) * static_cast<double>(p.context));
  // One whole context at its peak: between passes, plus what the pass in flight holds besides
  // (its chunk's blocks at bf16 beside their quantized form), so a turn that fills the context
  // alone never finds the pool short.
  const auto need =
      static_cast<int64_t>(kv::kv_bytes_per_token(spec, out.policy, p.context) * static_cast<double>(p.context)) +
      kv::kv_pass_bytes(spec, out.policy, std::min(request.prefill_chunk, p.context));
  if (need > left)
    throw Error("the KV cache for " + std::to_string(p.context) + " tokens under " + out.policy.describe() + " needs " +
                format_size(static_cast<uint64_t>(need)) + " but only " +
                format_size(static_cast<uint64_t>(std::max<int64_t>(left, 0))) +
                " is left under the memory ceiling after the weights and scratch (" + p.ceiling.source +
                "); lower --context or choose a smaller --kv-policy");
  out.kv_budget_bytes = std::max(need, std::min(full_bytes, left));
  if (request.kv_memory_gib) {
    out.kv_budget_bytes = static_cast<int64_t>(*request.kv_memory_gib * static_cast<double>(1ull << 30));
    // A pool smaller than one context would fail a long enough conversation on every retry: the
    // engine runs one sequence at a time, so no other request is there to free the room.
    if (out.kv_budget_bytes < need)
      throw Error("--kv-memory " + format_size(static_cast<uint64_t>(out.kv_budget_bytes)) + " holds less than one " +
                  std::to_string(p.context) + "-token context under " + out.policy.describe() + " (" +
                  format_size(static_cast<uint64_t>(need)) + "); raise --kv-memory or lower --context");
  }

  // More turns than the pool holds at their peak is safe (the scheduler preempts), only slower.
  const double bytes_per_token = kv::kv_bytes_per_token(spec, out.policy, p.context);
  const auto pool_tokens = static_cast<int64_t>(static_cast<double>(out.kv_budget_bytes) / std::max(bytes_per_token, 1.0));
  out.default_parallel = std::clamp<int64_t>(pool_tokens / kTokensPerParallelTurn, 2, 8);

  // Requests are prepared (parsed, rendered, tokenized) in what the ceiling leaves after the rest.
  const uint64_t committed = p.weights.bytes.value_or(0) + static_cast<uint64_t>(out.kv_budget_bytes) + p.scratch.total();
  out.preparation_budget_bytes = p.ceiling.bytes > committed ? p.ceiling.bytes - committed : 0;
  return out;
}

}  // namespace keel::plan
