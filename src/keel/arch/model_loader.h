#pragma once
// From a model folder to a runnable model description and its weights: the generic config
// reading (model/model_spec.h), then the family's refinement (family.h), then a check that the
// engine can run every layer. Plain functions; safe on any thread.
#include <filesystem>

#include "keel/model/config_view.h"
#include "keel/model/model_spec.h"
#include "keel/model/weights.h"

namespace keel::arch {

// The spec keel runs for `config`. Throws keel::Error naming the file and config key of anything
// unsupported: an unknown model_type, or a layer feature the engine does not run yet (MLA, linear
// attention, shared KV, mixture of experts, an unknown rope scaling, an odd head size).
ModelSpec runnable_spec(const ConfigView& config);

// The spec the config describes, refined by its family when keel has one; never refuses a
// feature (for `keel plan`, which sizes models keel cannot run). Throws only on unreadable keys.
ModelSpec describe_spec(const ConfigView& config);

// runnable_spec() of a model folder (or its config.json), or gguf_runnable_spec() of a GGUF model,
// without loading weights.
ModelSpec load_runnable_spec(const std::filesystem::path& model);

// runnable_spec(config.json of `dir`) and the weights of the folder; or, for a .gguf file or a
// folder holding one GGUF model and no config.json, arch/gguf_model.h's load_gguf_model().
ModelWeights load_model(const std::filesystem::path& dir);

}  // namespace keel::arch
