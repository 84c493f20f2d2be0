#include "keel/plan/planner.h"

#include "keel/arch/model_loader.h"
#include "keel/chat/template_files.h"
#include "keel/model/config_view.h"
#include "keel/plan/kv_bytes.h"
#include "keel/plan/number_format.h"
#include "keel/plan/plan_text.h"
#include "keel/util/error.h"

namespace keel::plan {
namespace fs = std::filesystem;
namespace {

std::string first_architecture(const ConfigView& c) {
  auto it = c.root().find("architectures");
  if (it != c.root().end() && it->is_array() && !it->empty() && (*it)[0].is_string()) return (*it)[0].get<std::string>();
  return "unknown architecture";
}

// Everything that is not KV: what the ceiling must hold before the first token.
uint64_t base_bytes(const Plan& p) { return *p.weight_bytes + p.scratch.total(); }

// The largest context in [0, limit] whose total stays under the ceiling; KV never shrinks as the
// context grows, so a binary search finds it.
int64_t largest_fitting_context(const Plan& p, KvPreset policy, int64_t limit) {
  const uint64_t base = base_bytes(p);
  if (base + kv_bytes_for_context(p.layout, policy, 0) > p.ceiling.bytes) return 0;
  int64_t lo = 0, hi = limit;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (base + kv_bytes_for_context(p.layout, policy, mid) <= p.ceiling.bytes) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// A round number to type into --context.
int64_t round_context(int64_t tokens) { return tokens >= 1024 ? tokens / 1024 * 1024 : tokens; }

std::string flags(KvPreset policy, int64_t context) {
  return "--kv-policy " + std::string(kv_preset_name(policy)) + " --context " + std::to_string(context);
}

Recommendation recommend(const Plan& p) {
  Recommendation r;
  if (!p.weight_bytes) {
    r.text = "no verdict: the weight bytes are unknown (" + p.weight_bytes_source +
             "); the KV and scratch figures above still hold";
    return r;
  }
  if (base_bytes(p) >= p.ceiling.bytes) {
    r.text = "does not fit: weights (" + format_size(*p.weight_bytes) + ") and scratch (" +
             format_size(p.scratch.total()) + ") alone exceed the ceiling (" + format_size(p.ceiling.bytes) +
             "); use a smaller or more quantized model, or more memory";
    return r;
  }
  const std::string ctx = format_count(p.context) + " tokens";
  if (p.chosen) {
    const PresetPlan& c = p.preset(*p.chosen);
    r.policy = p.chosen;
    r.context = p.context;
    r.text = flags(*p.chosen, p.context) + ": " + format_size(*c.total_bytes) + " of " + format_size(p.ceiling.bytes);
    if (p.requested_policy == KvPreset::Auto) {
      r.text += ", the most precise preset that holds " + ctx;
      if (*p.chosen != KvPreset::Full) {
        r.text += " (full holds " + format_count(*p.preset(KvPreset::Full).largest_context) + ")";
      }
    }
    return r;
  }
  // Nothing (or not the requested preset) holds the context: offer the longest context that keeps
  // tool calls safe, or auto's pick when the requested preset was the problem.
  if (p.requested_policy != KvPreset::Auto) {
    for (KvPreset preset : kPresetsByPrecision) {
      if (*p.preset(preset).fits) {
        r.policy = preset;
        r.context = p.context;
        r.text = std::string(kv_preset_name(p.requested_policy)) + " holds at most " +
                 format_count(*p.preset(p.requested_policy).largest_context) + " tokens; for " + ctx + " use " +
                 flags(preset, p.context);
        return r;
      }
    }
  }
  const int64_t best = round_context(*p.preset(KvPreset::Protect).largest_context);
  if (best == 0) {
    r.text = "does not fit: no preset holds even a short context next to the weights (" +
             format_size(*p.weight_bytes) + ") under the ceiling (" + format_size(p.ceiling.bytes) + ")";
    return r;
  }
  r.policy = KvPreset::Protect;
  r.context = best;
  r.text = "no preset holds " + ctx + "; " + flags(KvPreset::Protect, best) + " (int4 holds " +
           format_count(*p.preset(KvPreset::Int4).largest_context) + ")";
  return r;
}

AgentGates read_gates(const arch::ModelSource& model, const std::optional<fs::path>& override_file) {
  AgentGates g;
  std::optional<chat::ChatTemplateText> t;
  if (override_file) {
    t = chat::read_chat_template_file(*override_file);
  } else if (model.chat_template) {  // the template keel serve renders with
    t = chat::ChatTemplateText{model.chat_template->source, model.chat_template->origin};
  }
  if (!t) return g;
  g.template_source = t->origin;
  g.tool_calls = toolcall::detect_tool_call_format(t->text);
  g.reasoning = toolcall::detect_reasoning_control(t->text);
  return g;
}

// Which bytes the fit uses (Plan::weight_bytes); returns the computed format they came from, or
// nullptr when they are the files'.
const FormatWeights* choose_weight_bytes(Plan& p, bool format_requested) {
  const FormatWeights* selected = p.shapes.selected_format();
  const bool files_in_selected = selected && selected->configured;
  if (p.weights.bytes && (!format_requested || files_in_selected)) {
    p.weight_bytes = p.weights.bytes;
    p.weight_bytes_source = p.weights.bytes_source;
    return nullptr;
  }
  if (!selected) {
    p.weight_bytes_source = p.weights.bytes ? p.weights.bytes_source : p.weights.bytes_source + "; " + p.shapes.unavailable;
    return nullptr;
  }
  p.weight_bytes = selected->bytes;
  p.weight_bytes_source = "config.json's shapes as " + selected->format.name() +
                          (p.weights.bytes ? "; --weights names another format than the folder's files"
                                           : "; " + p.weights.bytes_source);
  return selected;
}

}  // namespace

const PresetPlan& Plan::preset(KvPreset policy) const {
  for (const auto& p : presets) {
    if (p.policy == policy) return p;
  }
  throw Error("internal: no plan for KV policy " + std::string(kv_preset_name(policy)));
}

Plan plan_model(const arch::ModelSource& model, const PlanRequest& request) {
  Plan p;
  const ModelFiles& files = model.files;
  p.model_dir = files.path;
  p.config_path = files.is_gguf() ? files.path : files.config_json;
  const ConfigView& config = model.config;  // a GGUF's metadata reads as the config.json it stands for
  p.architecture = model.is_gguf()
                       ? "GGUF " + files.gguf.front()->require_string("general.architecture", "names the architecture")
                       : first_architecture(config);
  p.model_type = config.root().value("model_type", std::string("unknown"));
  const ModelSpec spec = arch::describe_spec(model);
  p.layout = read_attention_layout(spec);
  p.scratch = estimate_scratch(spec, p.layout);
  p.weights = model.is_gguf() ? inventory_gguf_weights(files.gguf) : inventory_weights(files.path, config);
  std::optional<StorageFormat> requested_format;
  if (request.weights_format) requested_format = parse_storage_format(*request.weights_format);
  p.shapes = weights_from_shapes(spec, config, p.weights, requested_format, read_measured_bandwidth());
  if (model.is_gguf()) {  // the shapes' table is a comparison; the file's own bytes are its tensor infos
    std::erase_if(p.shapes.notes, [](const std::string& n) { return n.find("torch_dtype") != std::string::npos; });
    p.shapes.files_check = "not compared: a GGUF stores each tensor in its own type (tensor infos above)";
  }
  if (requested_format && !p.shapes.unavailable.empty())
    throw Error("--weights " + *request.weights_format + ": cannot size this model from its shapes: " + p.shapes.unavailable);
  p.weights_format_requested = requested_format.has_value();
  const FormatWeights* computed = choose_weight_bytes(p, requested_format.has_value());
  p.active = active_weights(spec, p.weights, p.shapes, computed);
  p.ceiling = machine_ceiling(request.memory_gib);
  p.requested_policy = request.policy;
  p.max_context = config.optional_int("max_position_embeddings");

  if (request.context) {
    if (*request.context <= 0) throw Error("--context must be a positive number of tokens");
    p.context = *request.context;
  } else {
    p.context = config.require_int("max_position_embeddings", "needed for the default context; or pass --context N");
    p.context_is_model_max = true;
  }
  if (p.max_context && p.context > *p.max_context) {
    p.warnings.push_back("the context " + format_count(p.context) + " is beyond the model's max_position_embeddings (" +
                         format_count(*p.max_context) + ")");
  }
  const int64_t search_limit = p.max_context ? std::max(*p.max_context, p.context) : p.context;

  for (KvPreset policy : kPresetsByPrecision) {
    PresetPlan pp;
    pp.policy = policy;
    pp.kv_bytes = kv_bytes_for_context(p.layout, policy, p.context);
    if (p.weight_bytes) {
      pp.total_bytes = base_bytes(p) + pp.kv_bytes;
      pp.fits = *pp.total_bytes <= p.ceiling.bytes;
      pp.largest_context = largest_fitting_context(p, policy, search_limit);
    }
    p.presets.push_back(pp);
  }
  if (p.weight_bytes) {
    if (request.policy == KvPreset::Auto) {
      for (const auto& pp : p.presets) {
        if (*pp.fits) {
          p.chosen = pp.policy;
          break;
        }
      }
    } else if (*p.preset(request.policy).fits) {
      p.chosen = request.policy;
    }
  }
  p.recommendation = recommend(p);
  p.gates = read_gates(model, request.chat_template);
  p.warnings.insert(p.warnings.begin(), p.weights.warnings.begin(), p.weights.warnings.end());
  if (p.shapes.matches_files == false) {
    p.warnings.push_back("the weights computed from config.json's shapes are not the files': " + p.shapes.files_check);
  }
  return p;
}

std::optional<uint64_t> kv_budget_bytes(const Plan& plan) {
  if (!plan.weight_bytes) return std::nullopt;
  const uint64_t base = base_bytes(plan);
  return base >= plan.ceiling.bytes ? 0 : plan.ceiling.bytes - base;
}

void require_fit(const Plan& plan) {
  if (!plan.weight_bytes) {
    throw Error("cannot check the fit, the weight bytes are unknown: " + plan.weight_bytes_source + "\n" +
                format_plan_text(plan));
  }
  if (!plan.chosen) throw Error(plan.recommendation.text + "\n" + format_plan_text(plan));
}

}  // namespace keel::plan
