#pragma once
// Weight bytes and parameters from config.json's shapes alone, before anything is downloaded:
// the checkpoint's tensor list (arch/checkpoint_tensors.h for the families keel serves, the
// descriptions in unserved_tensor_lists.h for the ones it cannot yet) stored in each weight
// format keel loads (weight_storage.h); totals, what one decoded token reads (the rule of
// model/active_bytes.h, applied through tensor_roles.h as for safetensors headers), and, when the
// files are there, a byte-for-byte check of the computed tensors against them.
//
// Plain data and a pure function: safe from any thread.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "keel/model/config_view.h"
#include "keel/model/model_spec.h"
#include "keel/plan/measured_bandwidth.h"
#include "keel/plan/weight_inventory.h"
#include "keel/plan/weight_storage.h"

namespace keel::plan {

struct FormatWeights {
  StorageFormat format;
  uint64_t bytes = 0;                  // resident
  uint64_t active_bytes = 0;           // read by one decode step
  uint64_t routed_expert_bytes = 0;    // all routed experts
  bool configured = false;             // the format config.json declares
  std::optional<std::string> not_loadable;  // why keel cannot load the model in this format
  std::optional<double> decode_tokens_per_s;  // bandwidth / active_bytes: an upper-bound estimate
};

struct ShapeWeights {
  std::string unavailable;    // set: no tensor list for this model (why); everything else is empty
  std::string tensor_source;  // whose tensor list was used
  std::optional<std::string> not_servable;  // keel cannot serve this model at all (why)
  int64_t total_parameters = 0;   // every tensor of the language model
  int64_t active_parameters = 0;  // what one decoded token multiplies by (same rule as the bytes)
  int64_t active_parameters_with_embedding_table = 0;  // as model cards count them, for comparison
  int64_t routed_expert_parameters = 0;
  std::optional<StorageFormat> configured;  // nullopt: config.json's format is not modelled (see notes)
  std::vector<FormatWeights> formats;       // the table; the configured format first when not in it
  std::optional<size_t> selected;           // --weights, else the configured format, else bf16
  std::optional<bool> matches_files;        // computed == the files (headers, or the declared total)
  std::string files_check;                  // what was compared, and the first differences
  std::vector<std::string> notes;           // towers and layers not counted, GGUF
  std::optional<MeasuredBandwidth> bandwidth;

  const FormatWeights* selected_format() const { return selected ? &formats[*selected] : nullptr; }
};

// `requested`: --weights. `files`: what the folder holds (its headers are compared when read).
// Never throws for a model it cannot describe: `unavailable` says why.
ShapeWeights weights_from_shapes(const ModelSpec& spec, const ConfigView& config, const WeightInventory& files,
                                 const std::optional<StorageFormat>& requested,
                                 const std::optional<MeasuredBandwidth>& bandwidth);

}  // namespace keel::plan
