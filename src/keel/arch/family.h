#pragma once
// An architecture family: what keel knows of one Hugging Face `model_type` beyond the generic
// config reading of model/model_spec.h. One file per family under arch/ defines one, and
// registry.cpp lists them; adding a family is that file plus a registry line.
//
// A family refines the spec (norm kind, activation, per-layer rope and scales, which layers have
// bias or q/k norms), names the checkpoint's tensors, and walks the layouts only it has (its
// experts' layout; an exporter's conversion, undone) within the one walk of model/tensor_walk.h,
// which both the loader and `keel plan` / `keel synth` run. The forward pass (transformer.h) is
// built from the shared blocks (blocks.h), each layer choosing its variant from its LayerSpec.
//
// Families are immutable globals: safe to use from any thread.
#include <span>
#include <string>
#include <string_view>

#include "keel/model/config_view.h"
#include "keel/model/model_spec.h"
#include "keel/model/tensor_walk.h"
#include "keel/model/weights.h"

namespace keel::arch {

struct Family {
  std::string_view model_type;  // config.json "model_type" (text_config's, for multimodal folders)
  // Refines `spec` (already read generically from `config`). Throws keel::Error naming the config
  // key of anything the family cannot run.
  void (*refine)(const ConfigView& config, ModelSpec& spec);
  TensorNames (*tensor_names)();
  // Whether the family runs MoE layers (the shared block's kinds, as its refined MoeSpec says).
  bool mixture_of_experts = false;
  // GGUF files of this family: their general.architecture ("qwen2", "gpt-oss"), and the names of
  // their tensors in ggml's scheme (usually ggml_tensor_names() as it is). Empty / nullptr: keel
  // reads this family from Hugging Face folders only.
  std::string_view gguf_architecture = {};
  TensorNames (*gguf_tensor_names)() = nullptr;
  // Qwen3-Next: Gated DeltaNet layers (AttentionKind::Linear) and a shared expert beside the routed ones.
  bool linear_attention = false;
  bool shared_expert = false;
  // What the family loads or converts its own way (model/weights.h); empty for most.
  FamilyLoading loading = {};
};

// The tensor names llama.cpp's converter gives every decoder (token_embd, output_norm, output,
// blk.N.attn_q, blk.N.ffn_gate_exps, ...), which families adjust where theirs differ.
TensorNames ggml_tensor_names();

// The registered families, in a stable order.
std::span<const Family* const> families();
// nullptr when `model_type` has no family.
const Family* find_family(std::string_view model_type);
// nullptr when no family reads GGUF files of `architecture` (general.architecture).
const Family* find_gguf_family(std::string_view architecture);
// "gpt-oss, llama, qwen2, ...": the GGUF architectures keel reads, for error messages.
std::string gguf_architecture_list();
// "gemma3_text, llama, mistral, qwen2, qwen3": for error messages.
std::string family_list();

}  // namespace keel::arch
