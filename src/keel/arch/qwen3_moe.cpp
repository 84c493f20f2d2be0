// Qwen3-MoE (Qwen3-Coder-30B-A3B, Qwen3-30B-A3B, Qwen3-235B-A22B): Qwen3 attention (q/k norm)
// with a mixture-of-experts FFN: router `mlp.gate` without bias, softmax over all experts, top-k,
// renormalized with norm_topk_prob; SwiGLU experts. decoder_sparse_step and mlp_only_layers make
// some layers dense (the generic reading). MLX folders stack the experts (`mlp.switch_mlp`).
#include "keel/arch/family.h"

namespace keel::arch {
namespace {

void refine(const ConfigView& c, ModelSpec& spec) {
  const std::string act = c.optional_string("hidden_act").value_or("silu");
  if (act != "silu") c.fail("hidden_act", "is '" + act + "'; keel runs Qwen3-MoE with silu only");
  for (LayerSpec& l : spec.layers) {
    l.qk_norm = true;
    if (l.moe && l.moe->expert_ffn_dim <= 0) c.fail("moe_intermediate_size", "must be positive");
  }
}

TensorNames tensor_names() { return {}; }

}  // namespace

extern const Family kQwen3Moe{"qwen3_moe", refine, tensor_names, /*mixture_of_experts=*/true, "qwen3moe", ggml_tensor_names};

}  // namespace keel::arch
