// Qwen3-Next (Qwen3NextForCausalLM: Qwen3-Next-80B-A3B, Qwen3-Coder-Next): a hybrid of Gated
// DeltaNet linear-attention layers (AttentionKind::Linear, arch/linear_attention.h) and, every
// full_attention_interval-th layer, gated full attention: q_proj gives each head's query and an
// output gate, q/k RMSNorm, rope on the first partial_rotary_factor of each head. Every RMSNorm
// but the linear layers' output norm scales by (1 + w). The FFN is Qwen's MoE (softmax top-k,
// renormalised) plus a shared expert times sigmoid(shared_expert_gate); mlp_only_layers are dense.
#include <cmath>

#include "keel/arch/family.h"
#include "keel/model/tensor_index.h"

namespace keel::arch {
namespace {

void refine(const ConfigView& c, ModelSpec& spec) {
  const std::string act = c.optional_string("hidden_act").value_or("silu");
  if (act != "silu") c.fail("hidden_act", "is '" + act + "'; keel runs Qwen3-Next with silu only");
  spec.norm = NormKind::RmsUnitOffset;
  const double partial = c.optional_number("partial_rotary_factor").value_or(1.0);
  if (partial <= 0 || partial > 1) c.fail("partial_rotary_factor", "must be in (0, 1]");
  for (LayerSpec& l : spec.layers) {
    if (l.moe && l.moe->expert_ffn_dim <= 0) c.fail("moe_intermediate_size", "must be positive");
    if (l.attention == AttentionKind::Linear) continue;
    if (l.attention != AttentionKind::Full) c.fail("layer_types", "Qwen3-Next has linear and full attention layers only");
    l.qk_norm = true;
    l.gated_attention = true;
    l.rope.rotary_dim = static_cast<int64_t>(std::lround(partial * static_cast<double>(l.head_dim)));
  }
}

TensorNames tensor_names() { return {}; }

// Whether the checkpoint is mlx-lm's conversion: its linear layers' conv weights are
// (channels, kernel, 1) instead of Hugging Face's (channels, 1, kernel).
bool converted_by_mlx_lm(const ModelWeights& w, const TensorIndex& index, const TensorNames& names) {
  for (int64_t i = 0; i < w.spec.num_layers; ++i) {
    const LayerSpec& ls = w.spec.layers[static_cast<size_t>(i)];
    if (ls.attention != AttentionKind::Linear) continue;
    const StoredTensor* conv = index.find(names.layer_prefix + std::to_string(i) + "." + names.linear_attn + "conv1d.weight");
    return conv && ls.linear->conv_kernel > 1 && conv->shape.size() == 3 && conv->shape[2] == 1;
  }
  return false;
}

// mlx-lm stores the (1 + w) norms with the one added (its sanitize(), detectable by the conv's
// moved axis): take it out again. Exact: a stored v in [1, 2) gives v - 1 and 1 + (v - 1) == v.
void sanitize(const TensorIndex& index, const TensorNames& names, ModelWeights& w) {
  if (!converted_by_mlx_lm(w, index, names)) return;
  auto unshift = [](std::vector<float>& v) {
    for (float& x : v) x -= 1.0f;
  };
  unshift(w.final_norm);
  for (LayerWeights& l : w.layers)
    for (std::vector<float>* v : {&l.attn_norm, &l.ffn_norm, &l.q_norm, &l.k_norm}) unshift(*v);
}

}  // namespace

extern const Family kQwen3Next{.model_type = "qwen3_next",
                                .refine = refine,
                                .tensor_names = tensor_names,
                                .mixture_of_experts = true,
                                .linear_attention = true,
                                .shared_expert = true,
                                .loading = {.sanitize = sanitize}};

}  // namespace keel::arch
