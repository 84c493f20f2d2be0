// Gemma 4 text decoder (Gemma4ForConditionalGeneration's `text_config`, model_type gemma4_text;
// weights under model.language_model., found by load_weights). Embeddings scaled by sqrt(hidden) rounded to bf16, as the
// reference does; RMSNorm x * w; four norms per layer; attention scale 1 with q/k norms and a
// weightless v norm; global layers with their own head size and KV heads, values = the raw k_proj
// output (attention_k_eq_v) and "proportional" rope; sliding layers with their own rope; a
// GELU-tanh dense FFN with the experts beside it (enable_moe_block); every layer's output times
// its layer_scalar; final logits soft-capped. Vision and audio towers are not read.
#include <cmath>

#include "keel/arch/family.h"
#include "keel/model/tensor_walk.h"
#include "keel/util/half.h"

namespace keel::arch {

extern const Family kGemma3Text;

namespace {

void refine(const ConfigView& c, ModelSpec& spec) {
  const std::string act = c.optional_string("hidden_activation").value_or("gelu_pytorch_tanh");
  if (act != "gelu_pytorch_tanh") c.fail("hidden_activation", "is '" + act + "'; keel runs Gemma 4 with gelu_pytorch_tanh only");
  // Refused rather than guessed: what gemma-4-26B-A4B does not use.
  if (c.optional_int("hidden_size_per_layer_input").value_or(0) > 0)
    c.fail("hidden_size_per_layer_input", "per-layer inputs are not supported yet");
  if (c.optional_int("num_kv_shared_layers").value_or(0) > 0)
    c.fail("num_kv_shared_layers", "layers that share another layer's KV are not supported yet");
  if (c.optional_bool("use_double_wide_mlp").value_or(false)) c.fail("use_double_wide_mlp", "is not supported yet");
  if (c.optional_string("use_bidirectional_attention").value_or("") == "all")
    c.fail("use_bidirectional_attention", "'all' (non-causal text attention) is not supported");
  spec.norm = NormKind::Rms;
  spec.embedding_scale = bf16_to_float(float_to_bf16(std::sqrt(static_cast<float>(spec.hidden_size))));
  const bool k_eq_v = c.optional_bool("attention_k_eq_v").value_or(false);
  const bool moe = c.optional_bool("enable_moe_block").value_or(false);
  for (LayerSpec& l : spec.layers) {
    l.attention_scale = 1.0;
    l.qk_norm = true;
    l.v_norm = true;
    l.values_are_keys = k_eq_v && l.attention == AttentionKind::Full;
    l.sandwich_norms = true;
    l.layer_scalar = true;
    l.activation = Activation::GeluTanh;
    if (!moe) {
      l.moe.reset();
    } else if (l.moe) {
      l.moe->beside_dense = true;
      l.moe->norm_topk_prob = true;
    }
  }
}

// Gemma 4 names its four norms as Gemma 3 does (its experts' names are TensorNames' defaults).
TensorNames tensor_names() { return kGemma3Text.tensor_names(); }

// The experts beside the dense FFN: gate and up the halves of one stacked tensor; the router with
// its input scale and per-expert scale, and the two branches' norms.
void walk_experts(TensorVisitor& t, const ModelSpec& s, const MoeSpec& moe, const TensorNames& n, const std::string& p,
                  LayerWeights& l) {
  const int64_t d = s.hidden_size, ff = moe.expert_ffn_dim, count = moe.experts;
  l.router = t.matrix(p + n.router_proj, count, d);
  l.router_scale = t.floats(p + n.router_scale, {d});
  l.expert_scale = t.floats(p + n.router_expert_scale, {count});
  l.post_dense_norm = t.floats(p + n.post_dense_norm + ".weight", {d});
  l.pre_moe_norm = t.floats(p + n.pre_moe_norm + ".weight", {d});
  l.post_moe_norm = t.floats(p + n.post_moe_norm + ".weight", {d});
  auto gate_up = t.stacked_dense(p + n.experts_gate_up_halves, count, 2 * ff, d);
  auto down = t.stacked_dense(p + n.experts_down, count, d, ff);
  l.experts.resize(static_cast<size_t>(count));
  for (size_t e = 0; e < gate_up.size(); ++e)
    l.experts[e] = gated_expert(row_half(gate_up[e], true), row_half(gate_up[e], false), std::move(down[e]));
}

}  // namespace

extern const Family kGemma4Text{.model_type = "gemma4_text",
                                 .refine = refine,
                                 .tensor_names = tensor_names,
                                 .mixture_of_experts = true,
                                 .loading = {.experts = walk_experts}};

}  // namespace keel::arch
