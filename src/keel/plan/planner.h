#pragma once
// `keel plan` and `keel serve` ask the same question: will this model and this context fit, and
// under which KV policy? plan_model() answers it from the folder alone (config.json, the weight
// index or safetensors headers, the chat template) without loading any weights.
// Plan is a plain value the caller owns. plan_model() reads the folder, /proc/meminfo and the
// bandwidth cache (measured_bandwidth.h) and keeps no state: any thread (keel calls it on the main
// thread, before anything loads); the other functions are pure functions of the Plan.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "keel/arch/model_source.h"
#include "keel/plan/active_weights.h"
#include "keel/plan/attention_layout.h"
#include "keel/plan/kv_presets.h"
#include "keel/plan/memory_ceiling.h"
#include "keel/plan/scratch_estimate.h"
#include "keel/plan/shape_weights.h"
#include "keel/plan/weight_inventory.h"
#include "keel/toolcall/format_detect.h"

namespace keel::plan {

struct PlanRequest {
  std::optional<int64_t> context;          // tokens; default: the model's max_position_embeddings
  KvPreset policy = KvPreset::Auto;
  std::optional<double> memory_gib;        // the ceiling; default: a share of this machine's RAM
  std::optional<std::filesystem::path> chat_template;  // overrides the folder's template
  // --weights: plan for the weights in this format (weight_storage.h names), computed from
  // config.json's shapes unless the folder's files are in it. Default: the files, else the
  // format config.json declares.
  std::optional<std::string> weights_format;
};

// One preset at the requested context. Fit fields are empty when the weight bytes are unknown.
struct PresetPlan {
  KvPreset policy = KvPreset::Full;
  uint64_t kv_bytes = 0;
  std::optional<uint64_t> total_bytes;      // weights + KV + scratch
  std::optional<bool> fits;
  std::optional<int64_t> largest_context;   // up to the model's maximum; 0 when nothing fits
};

// The two things that rule a model out for agent work whatever its scores.
struct AgentGates {
  std::optional<std::string> template_source;  // nullopt: no chat template found
  toolcall::ToolCallFormatInfo tool_calls = toolcall::tool_call_format_info(toolcall::ToolCallFormat::None);
  toolcall::ReasoningControl reasoning;
  bool tool_calls_usable() const { return template_source && tool_calls.keel_parses; }
};

struct Recommendation {
  std::optional<KvPreset> policy;  // nullopt: nothing to recommend (unknown weights, no fit)
  int64_t context = 0;
  std::string text;
};

struct Plan {
  std::filesystem::path model_dir;
  std::filesystem::path config_path;
  std::string architecture;
  std::string model_type;
  AttentionLayout layout;
  WeightInventory weights;             // what the folder's files hold
  ShapeWeights shapes;                 // what config.json's shapes give, per format
  // The weight bytes the fit is planned with: the files' (headers or declared total), else (or for
  // a --weights format the files are not in) the shapes' in the selected format. nullopt: unknown.
  std::optional<uint64_t> weight_bytes;
  std::string weight_bytes_source;
  bool weights_format_requested = false;  // --weights: the text shows that format, not the table
  ActiveWeights active;                // of `weight_bytes`, what one decode step reads
  ScratchEstimate scratch;
  MemoryCeiling ceiling;
  int64_t context = 0;
  std::optional<int64_t> max_context;  // max_position_embeddings
  bool context_is_model_max = false;   // no context was requested
  KvPreset requested_policy = KvPreset::Auto;
  std::vector<PresetPlan> presets;     // kPresetsByPrecision order
  std::optional<KvPreset> chosen;      // what serve would run: the requested preset, or auto's pick
  Recommendation recommendation;
  AgentGates gates;
  std::vector<std::string> warnings;   // the folder's warnings and the plan's own

  const PresetPlan& preset(KvPreset policy) const;
};

// `model` as arch::resolve_model found it (a folder, its config.json, or a GGUF model). Throws
// keel::Error naming the file and key when the config cannot be planned.
Plan plan_model(const arch::ModelSource& model, const PlanRequest& request);

// For `serve`: throws keel::Error with the plan in the message unless the requested context fits
// under the requested policy (or, for auto, under some preset).
void require_fit(const Plan& plan);

// For `serve`: the bytes the KV pool may use, the ceiling less weights and scratch (nullopt when
// the weight bytes are unknown, 0 when nothing is left).
std::optional<uint64_t> kv_budget_bytes(const Plan& plan);

}  // namespace keel::plan
