// gpt-oss (GptOssForCausalLM): q/k/v/o biases; a learned sink logit per head; layer_types
// alternating sliding and full attention; YaRN rope (read generically); every FFN a mixture of
// experts whose router has a bias and weights the top-k logits by a softmax over just them; MXFP4
// experts with gate and up fused (gate on even rows), biases, and a SwiGLU clamped at
// swiglu_limit with out = (up + 1) * gate * sigmoid(1.702 gate). lm_head is untied.
#include "keel/arch/family.h"
#include "keel/model/tensor_binding.h"

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

// As OpenAI ships them: the router with its bias; stacked MXFP4 experts, gate and up fused, with
// biases.
void load_fused_experts(const TensorIndex& index, const ModelSpec& s, const MoeSpec& moe, const TensorNames& n,
                        const std::string& p, LayerWeights& l) {
  const int64_t d = s.hidden_size, ff = moe.expert_ffn_dim, count = moe.experts;
  l.router = load_matrix(index, s, p + n.router, count, d);
  l.router_bias = load_vector(index, p + n.router + ".bias", count);
  const std::string gate_up = p + n.stacked_experts + n.expert_gate_up, down = p + n.stacked_experts + n.expert_down;
  if (!index.find(gate_up + "_blocks")) {
    if (const auto* dense = index.find(gate_up)) tensor_error(*dense, "dequantized gpt-oss experts are not supported (keel reads the MXFP4 _blocks/_scales form)");
    index.require(gate_up + "_blocks");
  }
  auto gate_ups = load_mxfp4_matrices(index, gate_up, count, 2 * ff, d);
  auto downs = load_mxfp4_matrices(index, down, count, d, ff);
  auto gate_up_bias = load_stacked_vectors(index, gate_up + "_bias", count, 2 * ff);
  auto down_bias = load_stacked_vectors(index, down + "_bias", count, d);
  l.experts.resize(static_cast<size_t>(count));
  for (size_t e = 0; e < l.experts.size(); ++e) {
    ExpertWeights& x = l.experts[e];
    x.gate_up = std::move(gate_ups[e]);
    x.down = std::move(downs[e]);
    x.gate_up_bias = std::move(gate_up_bias[e]);
    x.down_bias = std::move(down_bias[e]);
  }
}

// In GGUF: gate and up stacked apart, each with its (experts, expert_ffn) bias; the router's bias.
// The two biases are interleaved into gate_up_bias, as the fused layout's rows are.
void load_stacked_expert_biases(const TensorIndex& index, const MoeSpec& moe, int64_t d, const TensorNames& n,
                                const std::string& p, LayerWeights& l) {
  const int64_t ff = moe.expert_ffn_dim, count = moe.experts;
  const std::string stack = p + n.stacked_experts;
  l.router_bias = load_vector(index, p + n.router + ".bias", count);
  auto gate = load_stacked_vectors(index, stack + n.expert_gate + ".bias", count, ff);
  auto up = load_stacked_vectors(index, stack + n.expert_up + ".bias", count, ff);
  auto down = load_stacked_vectors(index, stack + n.expert_down + ".bias", count, d);
  for (size_t e = 0; e < l.experts.size(); ++e) {
    ExpertWeights& x = l.experts[e];
    x.gate_up_bias.resize(static_cast<size_t>(2 * ff));
    for (size_t j = 0; j < static_cast<size_t>(ff); ++j) {
      x.gate_up_bias[2 * j] = gate[e][j];
      x.gate_up_bias[2 * j + 1] = up[e][j];
    }
    x.down_bias = std::move(down[e]);
  }
}

void load_experts(const TensorIndex& index, const ModelSpec& s, const MoeSpec& moe, const TensorNames& n,
                  const std::string& p, LayerWeights& l) {
  if (!n.expert_gate_up.empty()) return load_fused_experts(index, s, moe, n, p, l);
  load_routed_experts(index, s, moe, n, p, l);
  load_stacked_expert_biases(index, moe, s.hidden_size, n, p, l);
}

}  // namespace

extern const Family kGptOss{.model_type = "gpt_oss",
                            .refine = refine,
                            .tensor_names = tensor_names,
                            .mixture_of_experts = true,
                            .gguf_architecture = "gpt-oss",
                            .gguf_tensor_names = gguf_tensor_names,
                            .loading = {.experts = load_experts}};

}  // namespace keel::arch
