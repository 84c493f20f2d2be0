#include "keel/plan/plan_text.h"

#include <cstdarg>
#include <cstdio>

#include "keel/kv/kv_layer_groups.h"
#include "keel/kv/kv_window.h"
#include "keel/plan/kv_bytes.h"
#include "keel/plan/number_format.h"

namespace keel::plan {
namespace {

void line(std::string& out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void line(std::string& out, const char* fmt, ...) {
  va_list args, again;
  va_start(args, fmt);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, args);
  va_end(args);
  if (n > 0) {
    std::string buf(static_cast<size_t>(n) + 1, '\0');
    std::vsnprintf(buf.data(), buf.size(), fmt, again);
    buf.resize(static_cast<size_t>(n));
    out += buf;
  }
  va_end(again);
  out += '\n';
}

std::string describe_layers(const AttentionLayout& layout) {
  std::string out = std::to_string(layout.num_layers) + " layers: ";
  for (size_t i = 0; i < layout.groups.size(); ++i) {
    out += (i ? " + " : "") + std::to_string(layout.groups[i].layers) + " " +
           std::string(attention_kind_name(layout.groups[i].shape.kind));
  }
  return out + " (" + layout.layer_pattern_source + ")";
}

std::string describe_weights(const Plan& p) {
  if (!p.weight_bytes) return "unknown: " + p.weight_bytes_source;
  return format_size(*p.weight_bytes) + " (" + format_count(static_cast<int64_t>(*p.weight_bytes)) + " bytes, from " +
         p.weight_bytes_source + ")";
}

std::string describe_parameters(const ShapeWeights& s) {
  std::string out = format_parameters(s.total_parameters) + " total";
  if (s.active_parameters != s.total_parameters) out += ", " + format_parameters(s.active_parameters) + " active per token";
  return out + " (" + s.tensor_source + ")";
}

std::string tokens_per_s(const FormatWeights& f) {
  if (!f.decode_tokens_per_s) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, *f.decode_tokens_per_s < 10 ? "~%.1f" : "~%.0f", *f.decode_tokens_per_s);
  return buf;
}

std::string loadable(const FormatWeights& f) {
  std::string out = f.not_loadable ? "no: " + *f.not_loadable : std::string("yes");
  return f.configured ? out + " (config.json's format)" : out;
}

// One row per weight format (or the --weights one): what the shapes give, before any download.
void format_table(std::string& out, const Plan& p) {
  const ShapeWeights& s = p.shapes;
  line(out, "%s", "");
  line(out, "Weights by format (from config.json's shapes; decode tok/s is an estimate, see below)");
  line(out, "  %-10s %11s %13s %12s  %s", "format", "total", "active/token", "decode tok/s", "keel loads it");
  for (size_t i = 0; i < s.formats.size(); ++i) {
    const FormatWeights& f = s.formats[i];
    const bool selected = s.selected && *s.selected == i;
    if (p.weights_format_requested && !selected) continue;
    line(out, "%s %-10s %11s %13s %12s  %s", selected ? ">" : " ", f.format.name().c_str(), format_size(f.bytes).c_str(),
         format_size(f.active_bytes).c_str(), tokens_per_s(f).c_str(), loadable(f).c_str());
  }
  if (s.bandwidth) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f GB/s", s.bandwidth->bytes_per_s / 1e9);
    line(out, "  decode tok/s = read bandwidth %s (%s) / active bytes per token: an upper bound, before KV reads "
              "and compute", buf, s.bandwidth->source.c_str());
  } else {
    line(out, "  decode tok/s: no bandwidth measured on this machine yet (run `keel bench --model DIR` once to cache it)");
  }
  for (const auto& note : s.notes) line(out, "  %s", note.c_str());
}

// Mixture-of-experts models only: a dense model reads all its weights but the embedding table.
std::string describe_active(const ActiveWeights& a) {
  if (!a.active_bytes) return "unknown: " + a.source;
  return format_size(*a.active_bytes) + " per decoded token (" + format_count(static_cast<int64_t>(*a.active_bytes)) +
         " bytes): attention, router, head and " + std::to_string(a.experts_per_token) + " of " +
         std::to_string(a.experts) + " experts in each of " + std::to_string(a.moe_layers) + " MoE layers";
}

std::string or_dash(const std::optional<std::string>& s) { return s ? *s : "-"; }

}  // namespace

std::string format_plan_text(const Plan& p) {
  std::string out;
  line(out, "keel plan  %s", p.model_dir.string().c_str());
  line(out, "  model       %s (%s), %s", p.architecture.c_str(), p.model_type.c_str(), describe_layers(p.layout).c_str());
  line(out, "  weights     %s", describe_weights(p).c_str());
  if (p.shapes.unavailable.empty()) {
    line(out, "  parameters  %s", describe_parameters(p.shapes).c_str());
    if (!p.shapes.files_check.empty()) line(out, "  computed    %s", p.shapes.files_check.c_str());
    if (p.shapes.not_servable) line(out, "  serve       keel cannot serve this model yet: %s", p.shapes.not_servable->c_str());
  } else {
    line(out, "  parameters  unknown: %s", p.shapes.unavailable.c_str());
  }
  if (p.active.moe_layers) {
    line(out, "  active      %s", describe_active(p.active).c_str());
    if (p.active.active_bytes) line(out, "              (%s)", p.active.source.c_str());
  }
  std::string format = p.weights.format;
  if (!p.weights.bytes_by_dtype.empty()) {
    format += "; tensors:";
    for (const auto& [dtype, bytes] : p.weights.bytes_by_dtype) format += " " + dtype + " " + format_size(bytes);
  }
  line(out, "  format      %s", format.c_str());
  for (const auto& note : p.weights.notes) line(out, "              %s", note.c_str());
  line(out, "  ceiling     %s (%s)", format_size(p.ceiling.bytes).c_str(), p.ceiling.source.c_str());
  line(out, "  context     %s tokens%s", format_count(p.context).c_str(),
       p.context_is_model_max ? " (the model's maximum; --context to change)" : "");
  if (p.gates.template_source) {
    line(out, "  tool calls  %s", toolcall::describe_tool_call_format(p.gates.tool_calls).c_str());
    line(out, "  reasoning   %s", toolcall::describe_reasoning_control(p.gates.reasoning).c_str());
    line(out, "              (from %s)", p.gates.template_source->c_str());
  } else {
    line(out, "  tool calls  unknown: no chat template in the folder (--chat-template FILE to check one)");
    line(out, "  reasoning   unknown: no chat template");
  }

  if (p.shapes.unavailable.empty()) format_table(out, p);

  line(out, "%s", "");
  line(out, "KV bytes per token");
  line(out, "  %-7s %-17s %-44s %11s %11s %11s", "layers", "kind", "shape", "bf16", "int8", "int4");
  for (const LayerGroup& g : p.layout.groups) {
    if (g.shape.per_token.empty()) {
      std::string fixed = g.shape.fixed_state_bytes
                              ? "fixed: " + format_count(g.shape.fixed_state_bytes) + " per layer live, " +
                                    format_count(g.layers * g.shape.fixed_state_bytes) + " in all; snapshots of " +
                                    format_count(g.layers * g.shape.snapshot_bytes) +
                                    " (latest, branch point, preamble's end, one per " +
                                    format_count(kv::kDefaultStateInterval * kv::kKvBlockTokens) + " tokens)"
                              : std::string("none");
      line(out, "  %-7lld %-17s %-44s %s", static_cast<long long>(g.layers),
           std::string(attention_kind_name(g.shape.kind)).c_str(), g.shape.description.c_str(), fixed.c_str());
      continue;
    }
    line(out, "  %-7lld %-17s %-44s %11s %11s %11s", static_cast<long long>(g.layers),
         std::string(attention_kind_name(g.shape.kind)).c_str(), g.shape.description.c_str(),
         format_count(group_bytes_per_token(g, KvFormat::BF16)).c_str(),
         format_count(group_bytes_per_token(g, KvFormat::Int8)).c_str(),
         format_count(group_bytes_per_token(g, KvFormat::Int4)).c_str());
  }
  line(out, "  %-7s %-17s %-44s %11s %11s %11s", "", "growing per token", "(full attention and MLA layers)",
       format_count(growing_bytes_per_token(p.layout, KvFormat::BF16)).c_str(),
       format_count(growing_bytes_per_token(p.layout, KvFormat::Int8)).c_str(),
       format_count(growing_bytes_per_token(p.layout, KvFormat::Int4)).c_str());

  line(out, "%s", "");
  line(out, "Memory at %s tokens (scratch %s: activations, score tiles, logits, runtime)", format_count(p.context).c_str(),
       format_size(p.scratch.total()).c_str());
  line(out, "  %-9s %11s %11s %6s %16s", "policy", "KV", "total", "fits", "largest context");
  for (const PresetPlan& pp : p.presets) {
    const bool chosen = p.chosen && *p.chosen == pp.policy;
    line(out, "%s %-9s %11s %11s %6s %16s", chosen ? ">" : " ", std::string(kv_preset_name(pp.policy)).c_str(),
         format_size(pp.kv_bytes).c_str(),
         or_dash(pp.total_bytes ? std::optional<std::string>(format_size(*pp.total_bytes)) : std::nullopt).c_str(),
         pp.fits ? (*pp.fits ? "yes" : "no") : "?",
         or_dash(pp.largest_context ? std::optional<std::string>(format_count(*pp.largest_context)) : std::nullopt)
             .c_str());
  }
  line(out, "  protect = %lld sink + %lld recent tokens at bf16, the rest int4 (system prompt and tools not counted)",
       static_cast<long long>(kProtectSinkTokens), static_cast<long long>(kProtectRecentTokens));

  line(out, "%s", "");
  line(out, "recommendation: %s", p.recommendation.text.c_str());
  if (p.gates.template_source && !p.gates.tool_calls_usable()) {
    line(out, "agent gate: FAILS - %s", toolcall::describe_tool_call_format(p.gates.tool_calls).c_str());
  }
  if (!p.warnings.empty()) {
    line(out, "%s", "");
    line(out, "warnings:");
    for (const auto& w : p.warnings) line(out, "  - %s", w.c_str());
  }
  return out;
}

}  // namespace keel::plan
