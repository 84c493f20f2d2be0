// gpt-oss (GptOssForCausalLM): q/k/v/o biases; a learned sink logit per head; layer_types
// alternating sliding and full attention; YaRN rope (read generically); every FFN a mixture of
// experts whose router has a bias and weights the top-k logits by a softmax over just them; MXFP4
// experts with gate and up fused (gate on even rows), biases, and a SwiGLU clamped at
// swiglu_limit with out = (up + 1) * gate * sigmoid(1.702 gate). lm_head is untied.
#include "keel/arch/family.h"

namespace keel::arch {
namespace {

void refine(const ConfigView& c, ModelSpec& spec) {
  const double limit = c.optional_number("swiglu_limit").value_or(7.0);
  if (limit <= 0) c.fail("swiglu_limit", "must be positive");
  for (LayerSpec& l : spec.layers) {
    if (!l.moe) c.fail("num_local_experts", "is needed: every gpt-oss layer is a mixture of experts");
    l.attention_sinks = true;
    l.moe->softmax_after_topk = true;
    l.moe->norm_topk_prob = false;
    l.moe->biases = true;
    l.moe->swiglu_limit = limit;
  }
}

TensorNames tensor_names() {
  TensorNames n;
  n.router = "mlp.router";
  n.stacked_experts = "mlp.experts.";
  n.expert_gate_up = "gate_up_proj";
  n.expert_down = "down_proj";
  return n;
}

// GGUF (llama.cpp's converter): the norm before the FFN is post_attention_norm, and gate and up
// are stacked apart with their biases (the loader interleaves the biases, the block the outputs).
TensorNames gguf_tensor_names() {
  TensorNames n = ggml_tensor_names();
  n.ffn_norm = "post_attention_norm";
  return n;
}

}  // namespace

extern const Family kGptOss{"gpt_oss", refine, tensor_names, /*mixture_of_experts=*/true, "gpt-oss", gguf_tensor_names};

}  // namespace keel::arch
