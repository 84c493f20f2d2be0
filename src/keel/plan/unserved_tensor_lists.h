#pragma once
// The checkpoint tensors of model families keel cannot serve yet, described from their
// Hugging Face modeling files so `keel plan` can size them before the download: Qwen3-Next
// (Gated DeltaNet linear attention beside gated full attention, shared-expert MoE) and DeepSeek-V3
// / Kimi K2 (MLA, DeepSeekMoE with shared experts). No loader reads these lists, so every matrix
// has loads_as 0: the plan says the model cannot be served.
//
// Pure functions: safe from any thread.
#include <optional>
#include <string>
#include <vector>

#include "keel/arch/checkpoint_tensors.h"
#include "keel/model/config_view.h"
#include "keel/model/model_spec.h"

namespace keel::plan {

struct UnservedTensorList {
  std::vector<arch::CheckpointTensor> tensors;
  std::string described_from;      // "transformers' modeling_qwen3_next.py"
  std::vector<std::string> notes;  // what the list leaves out (multi-token-prediction layers)
};

// nullopt when keel has no description for spec.model_type. Throws keel::Error naming a config
// key the shapes need.
std::optional<UnservedTensorList> unserved_tensor_list(const ModelSpec& spec, const ConfigView& config);

}  // namespace keel::plan
