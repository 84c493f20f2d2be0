#pragma once
// From a model folder to a runnable model description and its weights: the generic config
// reading (model/model_spec.h), then the family's refinement (family.h), then a check that the
// engine can run every layer. Plain functions; safe on any thread.
#include <filesystem>

#include "keel/arch/model_source.h"
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

// The same for a resolved model: its config, and for a GGUF what the file lays out differently
// (gguf_model.h's adjust_for_gguf).
ModelSpec runnable_spec(const ModelSource& model);
ModelSpec describe_spec(const ModelSource& model);

// runnable_spec(model) and its weights: a folder's safetensors, or the GGUF's mapped shards.
ModelWeights load_model(const ModelSource& model);
// resolve_model(path), then the above: for callers that need nothing else of the source (tests).
ModelWeights load_model(const std::filesystem::path& model);

}  // namespace keel::arch
