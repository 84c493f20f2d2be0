#pragma once
// Sorts a checkpoint's tensors by how a decode step uses them, from their names alone, so the
// active-bytes split works from safetensors headers for any storage format (MLX, mxfp4, fp8...).
// Pure functions of the names and bytes they are given: any thread.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "keel/model/active_bytes.h"
#include "keel/model/model_spec.h"

namespace keel::plan {

enum class TensorRole { EveryToken, Embedding, OutputHead, RoutedExpert, NotDecoded };

// `layer` is set to the decoder layer a RoutedExpert tensor belongs to. Routed experts are the
// tensors under `.experts.` (per-expert or gpt-oss's fused ones), MLX's `.switch_mlp.` or GGUF's
// `blk.N.ffn_*_exps`; shared experts (`shared_expert.`, `shared_experts.`, `_shexp`) are read by
// every token. GGUF's token_embd and output are the embedding and head.
TensorRole tensor_role(const std::string& name, int64_t& layer);

// `tensors`: (name, bytes) of every counted tensor. Routed-expert tensors of a layer the spec
// does not make MoE count as read by every token (the cautious side).
WeightBytesByUse weight_use_from_tensors(const ModelSpec& spec,
                                         const std::vector<std::pair<std::string, uint64_t>>& tensors);

}  // namespace keel::plan
