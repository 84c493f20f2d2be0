#include "keel/plan/plan_json.h"

#include <functional>

#include "keel/plan/kv_bytes.h"

namespace keel::plan {
namespace {

template <typename T>
nlohmann::json or_null(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json per_format(const std::function<int64_t(KvFormat)>& bytes) {
  nlohmann::json j = nlohmann::json::object();
  for (KvFormat f : kAllKvFormats) j[std::string(kv_format_name(f))] = bytes(f);
  return j;
}

nlohmann::json layer_groups(const AttentionLayout& layout) {
  nlohmann::json groups = nlohmann::json::array();
  for (const LayerGroup& g : layout.groups) {
    nlohmann::json j = {{"kind", attention_kind_name(g.shape.kind)}, {"layers", g.layers}, {"shape", g.shape.description}};
    if (g.shape.kind == AttentionKind::Sliding) j["window"] = g.shape.window;
    if (g.shape.fixed_state_bytes) {
      j["fixed_state_bytes_per_layer"] = g.shape.fixed_state_bytes;
      j["snapshot_bytes_per_layer"] = g.shape.snapshot_bytes;
    }
    if (!g.shape.per_token.empty()) {
      j["bytes_per_token"] = per_format([&](KvFormat f) { return group_bytes_per_token(g, f); });
    }
    groups.push_back(j);
  }
  return groups;
}

nlohmann::json weights_json(const Plan& p, const WeightInventory& w, const ActiveWeights& a) {
  // `bytes` is what the fit is planned with; `files_bytes` what the folder's files hold.
  nlohmann::json j = {{"bytes", or_null(p.weight_bytes)}, {"source", p.weight_bytes_source},
                      {"files_bytes", or_null(w.bytes)}, {"files_source", w.bytes_source}, {"format", w.format}};
  // Total vs active: `bytes` must be resident, `active_bytes_per_token` is what a decode step reads.
  j["active_bytes_per_token"] = or_null(a.active_bytes);
  j["active_source"] = a.source;
  j["routed_expert_bytes"] = a.routed_expert_bytes;
  j["moe"] = a.moe_layers ? nlohmann::json{{"layers", a.moe_layers}, {"experts", a.experts},
                                           {"experts_per_token", a.experts_per_token}}
                          : nlohmann::json(nullptr);
  if (w.mlx) {
    j["mlx_quantization"] = {{"bits", w.mlx->bits}, {"group_size", w.mlx->group_size},
                             {"bits_per_weight", w.mlx->bits_per_weight()}};
  }
  nlohmann::json by_dtype = nlohmann::json::object();
  for (const auto& [dtype, bytes] : w.bytes_by_dtype) by_dtype[dtype] = bytes;
  j["bytes_by_dtype"] = by_dtype;
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : w.counted_files) files.push_back(f.filename().string());
  j["counted_files"] = files;
  j["notes"] = w.notes;
  return j;
}

// Everything config.json's shapes give: the parameter counts and one entry per weight format.
nlohmann::json shapes_json(const ShapeWeights& s) {
  if (!s.unavailable.empty()) return {{"unavailable", s.unavailable}};
  nlohmann::json formats = nlohmann::json::array();
  for (const FormatWeights& f : s.formats) {
    formats.push_back({{"format", f.format.name()},
                       {"total_bytes", f.bytes},
                       {"active_bytes_per_token", f.active_bytes},
                       {"routed_expert_bytes", f.routed_expert_bytes},
                       {"configured", f.configured},
                       {"keel_loads", !f.not_loadable},
                       {"not_loadable_reason", or_null(f.not_loadable)},
                       {"estimated_decode_tokens_per_s", or_null(f.decode_tokens_per_s)}});
  }
  return {{"tensor_source", s.tensor_source},
          {"total_parameters", s.total_parameters},
          {"active_parameters_per_token", s.active_parameters},
          {"active_parameters_with_embedding_table", s.active_parameters_with_embedding_table},
          {"routed_expert_parameters", s.routed_expert_parameters},
          {"keel_serves", !s.not_servable},
          {"not_servable_reason", or_null(s.not_servable)},
          {"configured_format", s.configured ? nlohmann::json(s.configured->name()) : nlohmann::json(nullptr)},
          {"selected_format", s.selected_format() ? nlohmann::json(s.selected_format()->format.name()) : nlohmann::json(nullptr)},
          {"formats", formats},
          {"gguf", "not computed from shapes: plan the .gguf file itself"},
          {"matches_files", or_null(s.matches_files)},
          {"files_check", s.files_check},
          {"bandwidth_bytes_per_s", s.bandwidth ? nlohmann::json(s.bandwidth->bytes_per_s) : nlohmann::json(nullptr)},
          {"bandwidth_source", s.bandwidth ? nlohmann::json(s.bandwidth->source) : nlohmann::json(nullptr)},
          {"notes", s.notes}};
}

nlohmann::json gates_json(const AgentGates& g) {
  if (!g.template_source) {
    return {{"template", nullptr}, {"tool_call_format", nullptr}, {"keel_parses_tool_calls", false},
            {"reasoning", nullptr}};
  }
  return {{"template", *g.template_source},
          {"tool_call_format", g.tool_calls.name},
          {"tool_call_marker", g.tool_calls.marker},
          {"keel_parses_tool_calls", g.tool_calls.keel_parses},
          {"tool_calls", toolcall::describe_tool_call_format(g.tool_calls)},
          {"reasoning", toolcall::reasoning_kind_name(g.reasoning.kind)},
          {"reasoning_control", g.reasoning.how}};
}

}  // namespace

nlohmann::json plan_to_json(const Plan& p) {
  nlohmann::json presets = nlohmann::json::array();
  for (const PresetPlan& pp : p.presets) {
    presets.push_back({{"policy", kv_preset_name(pp.policy)},
                       {"kv_bytes", pp.kv_bytes},
                       {"total_bytes", or_null(pp.total_bytes)},
                       {"fits", or_null(pp.fits)},
                       {"largest_context", or_null(pp.largest_context)}});
  }
  nlohmann::json rec = {{"policy", p.recommendation.policy ? nlohmann::json(kv_preset_name(*p.recommendation.policy))
                                                           : nlohmann::json(nullptr)},
                        {"context", p.recommendation.policy ? nlohmann::json(p.recommendation.context)
                                                            : nlohmann::json(nullptr)},
                        {"text", p.recommendation.text}};
  return {
      {"model_dir", p.model_dir.string()},
      {"config", p.config_path.string()},
      {"architecture", p.architecture},
      {"model_type", p.model_type},
      {"layers", p.layout.num_layers},
      {"layer_pattern_source", p.layout.layer_pattern_source},
      {"layer_groups", layer_groups(p.layout)},
      {"kv_bytes_per_token_growing", per_format([&](KvFormat f) { return growing_bytes_per_token(p.layout, f); })},
      {"fixed_state_bytes", fixed_state_bytes(p.layout)},
      {"weights", weights_json(p, p.weights, p.active)},
      {"shapes", shapes_json(p.shapes)},
      {"scratch", {{"bytes", p.scratch.total()},
                   {"activations", p.scratch.activations},
                   {"attention_tiles", p.scratch.attention_tiles},
                   {"logits", p.scratch.logits},
                   {"runtime", p.scratch.runtime}}},
      {"ceiling", {{"bytes", p.ceiling.bytes}, {"source", p.ceiling.source}}},
      {"kv_budget_bytes", or_null(kv_budget_bytes(p))},
      {"context", p.context},
      {"context_is_model_max", p.context_is_model_max},
      {"max_context", or_null(p.max_context)},
      {"requested_policy", kv_preset_name(p.requested_policy)},
      {"chosen_policy", p.chosen ? nlohmann::json(kv_preset_name(*p.chosen)) : nlohmann::json(nullptr)},
      {"presets", presets},
      {"recommendation", rec},
      {"agent_gates", gates_json(p.gates)},
      {"warnings", p.warnings},
  };
}

}  // namespace keel::plan
