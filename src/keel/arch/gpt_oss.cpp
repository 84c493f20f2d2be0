// gpt-oss (GptOssForCausalLM): q/k/v/o biases; a learned sink logit per head; layer_types
// alternating sliding and full attention; YaRN rope (read generically); every FFN a mixture of
// experts whose router has a bias and weights the top-k logits by a softmax over just them; MXFP4
// experts with gate and up fused (gate on even rows), biases, and a SwiGLU clamped at
// swiglu_limit with out = (up + 1) * gate * sigmoid(1.702 gate). lm_head is untied.
#include "keel/arch/family.h"
#include "keel/model/tensor_walk.h"

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
void walk_fused_experts(TensorVisitor& t, const ModelSpec& s, const MoeSpec& moe, const TensorNames& n,
                        const std::string& p, LayerWeights& l) {
  const int64_t d = s.hidden_size, ff = moe.expert_ffn_dim, count = moe.experts;
  l.router = t.matrix(p + n.router, count, d);
  l.router_bias = t.floats(p + n.router + ".bias", {count});
  const std::string gate_up = p + n.stacked_experts + n.expert_gate_up, down = p + n.stacked_experts + n.expert_down;
  auto gate_ups = t.stacked_mxfp4(gate_up, count, 2 * ff, d);
  auto downs = t.stacked_mxfp4(down, count, d, ff);
  auto gate_up_bias = per_entry(t, gate_up + "_bias", count, 2 * ff);
  auto down_bias = per_entry(t, down + "_bias", count, d);
  l.experts.resize(static_cast<size_t>(count));
  for (size_t e = 0; e < gate_ups.size(); ++e) {
    ExpertWeights& x = l.experts[e];
    x.gate_up = std::move(gate_ups[e]);
    x.down = std::move(downs[e]);
    x.gate_up_bias = std::move(gate_up_bias[e]);
    x.down_bias = std::move(down_bias[e]);
  }
}

// In GGUF: gate and up stacked apart, each with its (experts, expert_ffn) bias; the router's bias.
// The two biases are interleaved into gate_up_bias, as the fused layout's rows are.
void walk_expert_biases(TensorVisitor& t, const MoeSpec& moe, int64_t d, const TensorNames& n, const std::string& p,
                        LayerWeights& l) {
  const int64_t ff = moe.expert_ffn_dim, count = moe.experts;
  const std::string stack = p + n.stacked_experts;
  l.router_bias = t.floats(p + n.router + ".bias", {count});
  auto gate = per_entry(t, stack + n.expert_gate + ".bias", count, ff);
  auto up = per_entry(t, stack + n.expert_up + ".bias", count, ff);
  auto down = per_entry(t, stack + n.expert_down + ".bias", count, d);
  for (size_t e = 0; e < l.experts.size(); ++e) {
    ExpertWeights& x = l.experts[e];
    if (!gate[e].empty()) {
      x.gate_up_bias.resize(static_cast<size_t>(2 * ff));
      for (size_t j = 0; j < static_cast<size_t>(ff); ++j) {
        x.gate_up_bias[2 * j] = gate[e][j];
        x.gate_up_bias[2 * j + 1] = up[e][j];
      }
    }
    x.down_bias = std::move(down[e]);
  }
}

void walk_experts(TensorVisitor& t, const ModelSpec& s, const MoeSpec& moe, const TensorNames& n, const std::string& p,
                  LayerWeights& l) {
  if (!n.expert_gate_up.empty()) return walk_fused_experts(t, s, moe, n, p, l);
  walk_routed_experts(t, s, moe, n, p, l);
  walk_expert_biases(t, moe, s.hidden_size, n, p, l);
}

}  // namespace

extern const Family kGptOss{.model_type = "gpt_oss",
                            .refine = refine,
                            .tensor_names = tensor_names,
                            .mixture_of_experts = true,
                            .gguf_architecture = "gpt-oss",
                            .gguf_tensor_names = gguf_tensor_names,
                            .loading = {.experts = walk_experts}};

}  // namespace keel::arch
