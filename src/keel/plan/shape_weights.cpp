#include "keel/plan/shape_weights.h"

#include <algorithm>
#include <map>
#include <set>

#include "keel/arch/family.h"
#include "keel/arch/model_loader.h"
#include "keel/plan/number_format.h"
#include "keel/plan/tensor_roles.h"
#include "keel/plan/unserved_tensor_lists.h"
#include "keel/util/error.h"

namespace keel::plan {
namespace {

struct TensorList {
  std::vector<arch::CheckpointTensor> tensors;
  std::string source;
  std::vector<std::string> notes;
};

// The format config.json declares, when keel plan can store tensors in it.
std::optional<StorageFormat> configured_format(const ModelSpec& spec, const ConfigView& c, std::vector<std::string>& notes) {
  const std::string dtype = c.optional_string("torch_dtype").value_or(c.optional_string("dtype").value_or(""));
  StorageFormat f;
  if (dtype == "float32") f.float_bytes = 4;
  if (dtype == "float16") f.f16 = true;
  if (spec.quantization) {
    f.kind = StorageFormat::Kind::MlxAffine;
    f.bits = spec.quantization->bits;
    f.group_size = spec.quantization->group_size;
    return f;
  }
  if (const auto* qc = c.find("quantization_config"); qc && qc->is_object() && qc->contains("quant_method")) {
    const std::string method = qc->value("quant_method", std::string());
    if (method == "mxfp4") return StorageFormat{StorageFormat::Kind::Mxfp4};
    notes.push_back("config.json's own format ('" + method +
                    "') is not modelled: its scale tensors differ between repos; the formats below are what keel loads");
    return std::nullopt;
  }
  if (dtype == "bfloat16" || dtype == "float16" || dtype == "float32") return f;
  notes.push_back("config.json names no torch_dtype: the checkpoint's own format is unknown");
  return std::nullopt;
}

// Where the files put the language model (plain, or nested in a multimodal folder).
TensorNames names_for(const arch::Family& family, const ConfigView& config, const WeightInventory& files) {
  TensorNames names = family.tensor_names();
  const std::set<std::string> present(files.tensor_names.begin(), files.tensor_names.end());
  if (present.empty()) return config.has_text_config() ? names.rooted_at(kMultimodalRoots[0]) : names;
  if (present.count(names.embed + ".weight")) return names;
  for (std::string_view root : kMultimodalRoots) {
    TensorNames nested = names.rooted_at(root);
    if (present.count(nested.embed + ".weight")) return nested;
  }
  return names;
}

// mlx-lm stacks Qwen-style experts (switch_mlp); the names say so when the files list them.
bool mlx_stacked_experts(const WeightInventory& files, const std::optional<StorageFormat>& configured) {
  bool per_expert = false;
  for (const auto& n : files.tensor_names) {
    if (n.find(".switch_mlp.") != std::string::npos) return true;
    per_expert = per_expert || n.find(".experts.") != std::string::npos;
  }
  return !per_expert && configured && configured->kind == StorageFormat::Kind::MlxAffine;
}

std::optional<TensorList> tensor_list(const ModelSpec& spec, const ConfigView& config, const WeightInventory& files,
                                      const std::optional<StorageFormat>& configured) {
  if (const arch::Family* family = arch::find_family(spec.model_type)) {
    TensorList l;
    const TensorNames names = names_for(*family, config, files);
    l.tensors = arch::checkpoint_tensors(spec, names, mlx_stacked_experts(files, configured));
    l.source = "keel's " + spec.model_type + " family: the tensors its loader reads";
    return l;
  }
  if (auto u = unserved_tensor_list(spec, config)) return TensorList{std::move(u->tensors), u->described_from, u->notes};
  return std::nullopt;
}

std::vector<std::pair<std::string, uint64_t>> named(const std::vector<StoredTensor>& stored, bool parameters) {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (const StoredTensor& t : stored)
    out.emplace_back(t.name, parameters ? static_cast<uint64_t>(t.parameters) : t.bytes);
  return out;
}

// Tensor by tensor against the headers; the language model only (towers are not in the list).
void compare_with_headers(const std::vector<StoredTensor>& computed, const WeightInventory& files, ShapeWeights& w) {
  std::map<std::string, uint64_t> want, have;
  uint64_t want_total = 0, have_total = 0;
  for (const StoredTensor& t : computed) {
    want[t.name] = t.bytes;
    want_total += t.bytes;
  }
  for (const auto& [name, bytes] : files.tensors) {
    int64_t layer = -1;
    if (tensor_role(name, layer) == TensorRole::NotDecoded) continue;
    have[name] = bytes;
    have_total += bytes;
  }
  std::vector<std::string> differences;
  for (const auto& [name, bytes] : want) {
    auto it = have.find(name);
    if (it == have.end()) {
      differences.push_back(name + " is not in the files");
    } else if (it->second != bytes) {
      differences.push_back(name + ": " + format_count(static_cast<int64_t>(bytes)) + " bytes computed, " +
                            format_count(static_cast<int64_t>(it->second)) + " in the file");
    }
  }
  for (const auto& [name, bytes] : have)
    if (!want.count(name)) differences.push_back(name + " is in the files but not in the tensor list");
  w.matches_files = differences.empty();
  if (differences.empty()) {
    w.files_check = "equal to the safetensors headers tensor by tensor (" + std::to_string(want.size()) + " tensors, " +
                    format_count(static_cast<int64_t>(want_total)) + " bytes)";
    return;
  }
  w.files_check = "differs from the safetensors headers: " + format_count(static_cast<int64_t>(want_total)) +
                  " bytes computed, " + format_count(static_cast<int64_t>(have_total)) + " in the files; " +
                  std::to_string(differences.size()) + " differences, first: ";
  for (size_t i = 0; i < differences.size() && i < 3; ++i) w.files_check += (i ? "; " : "") + differences[i];
}

void compare_with_declared_total(uint64_t computed, const WeightInventory& files, const ConfigView& config,
                                 ShapeWeights& w) {
  if (computed < *files.bytes && config.root().contains("vision_config")) {
    // The declared total holds the tower too, which the list does not: not comparable.
    w.files_check = "not comparable with " + files.bytes_source + ": " + format_count(static_cast<int64_t>(*files.bytes)) +
                    " bytes declared, " + format_count(static_cast<int64_t>(computed)) +
                    " computed for the language model; the other " +
                    format_count(static_cast<int64_t>(*files.bytes - computed)) + " are the vision tower and projector";
    return;
  }
  w.matches_files = computed == *files.bytes;
  if (*w.matches_files) {
    w.files_check = "equal to " + files.bytes_source + ": " + format_count(static_cast<int64_t>(computed)) + " bytes";
    return;
  }
  w.files_check = "differs from " + files.bytes_source + ": " + format_count(static_cast<int64_t>(computed)) +
                  " bytes computed, " + format_count(static_cast<int64_t>(*files.bytes)) + " declared";
}

void note_towers(const ConfigView& config, ShapeWeights& w) {
  for (const char* tower : {"vision_config", "audio_config"}) {
    auto it = config.root().find(tower);
    if (it == config.root().end() || it->is_null()) continue;
    w.notes.push_back(std::string("not counted: the ") + (tower[0] == 'v' ? "vision" : "audio") + " tower (" + tower +
                      "); keel plan does not size other modalities' towers, and a text decode step never reads them");
  }
}

}  // namespace

ShapeWeights weights_from_shapes(const ModelSpec& spec, const ConfigView& config, const WeightInventory& files,
                                 const std::optional<StorageFormat>& requested,
                                 const std::optional<MeasuredBandwidth>& bandwidth) {
  ShapeWeights w;
  w.bandwidth = bandwidth;
  std::optional<TensorList> list;
  try {
    w.configured = configured_format(spec, config, w.notes);
    list = tensor_list(spec, config, files, w.configured);
  } catch (const Error& e) {
    w.unavailable = e.what();
    return w;
  }
  if (!list) {
    w.unavailable = "keel has no tensor list for model_type '" + spec.model_type + "'";
    w.notes.clear();
    return w;
  }
  w.tensor_source = list->source;
  w.notes.insert(w.notes.end(), list->notes.begin(), list->notes.end());
  note_towers(config, w);
  w.notes.push_back("GGUF (Q8_0, Q4_K_M, ...): not computed from shapes; keel plan FILE.gguf counts the file's tensors");
  try {
    arch::runnable_spec(config);
  } catch (const Error& e) {
    w.not_servable = e.what();
  }

  std::vector<StorageFormat> formats = table_formats(list->tensors);
  auto add_if_missing = [&](const StorageFormat& f) {
    for (size_t i = 0; i < formats.size(); ++i)
      if (formats[i] == f) return i;
    formats.insert(formats.begin(), f);
    return size_t{0};
  };
  if (w.configured) add_if_missing(*w.configured);
  if (requested) add_if_missing(*requested);

  const MlxOverrides& overrides = spec.quantization_overrides;
  for (const StorageFormat& f : formats) {
    FormatWeights fw;
    fw.format = f;
    fw.configured = w.configured && *w.configured == f;
    const MlxOverrides& own = fw.configured ? overrides : MlxOverrides{};
    const std::vector<StoredTensor> stored = stored_tensors(list->tensors, f, own);
    const DecodeWeightBytes d = decode_weight_bytes(weight_use_from_tensors(spec, named(stored, false)));
    fw.bytes = d.resident;
    fw.active_bytes = d.active;
    fw.routed_expert_bytes = 0;
    for (const auto& r : weight_use_from_tensors(spec, named(stored, false)).routed) fw.routed_expert_bytes += r.bytes;
    // The full reason is on the plan's serve line; each row only says it.
    fw.not_loadable = w.not_servable ? "keel cannot serve " + spec.model_type + " yet"
                                     : unloadable_reason(list->tensors, f, own);
    if (bandwidth && fw.active_bytes) fw.decode_tokens_per_s = bandwidth->bytes_per_s / static_cast<double>(fw.active_bytes);
    if (fw.configured) {
      if (!files.tensors.empty()) {
        compare_with_headers(stored, files, w);
      } else if (files.bytes) {
        compare_with_declared_total(fw.bytes, files, config, w);
      }
    }
    w.formats.push_back(std::move(fw));
  }
  if (!w.configured && !files.tensors.empty()) w.files_check = "not compared: config.json's own format is not modelled";

  for (size_t i = 0; i < w.formats.size(); ++i) {
    const bool wanted = requested ? w.formats[i].format == *requested : w.formats[i].configured;
    if (wanted) w.selected = i;
  }
  if (!w.selected) w.selected = 0;  // bf16, when the config's own format is not modelled

  const std::vector<StoredTensor> params = stored_tensors(list->tensors, StorageFormat{});
  const WeightBytesByUse use = weight_use_from_tensors(spec, named(params, true));
  const DecodeWeightBytes counts = decode_weight_bytes(use);
  w.total_parameters = static_cast<int64_t>(counts.resident);
  w.active_parameters = static_cast<int64_t>(counts.active);
  // Published active counts usually include the whole input embedding table; keel reads one row.
  w.active_parameters_with_embedding_table =
      w.active_parameters + (use.tied_head ? 0 : static_cast<int64_t>(use.embedding - use.embedding / static_cast<uint64_t>(std::max<int64_t>(use.vocab_size, 1))));
  for (const auto& r : use.routed) w.routed_expert_parameters += static_cast<int64_t>(r.bytes);
  return w;
}

}  // namespace keel::plan
