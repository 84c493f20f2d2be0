#include "keel/plan/unserved_tensor_lists.h"

namespace keel::plan {
namespace {

using arch::CheckpointTensor;

// Matrices of unserved families: quantizable like any linear, but no keel loader reads them.
void matrix(std::vector<CheckpointTensor>& out, const std::string& module, int64_t rows, int64_t cols) {
  out.push_back({module, {rows, cols}, true, true, 0});
}
void vector(std::vector<CheckpointTensor>& out, const std::string& name, std::vector<int64_t> shape) {
  out.push_back({name, std::move(shape), false, false, 0});
}

void gated_ffn(std::vector<CheckpointTensor>& out, const std::string& p, int64_t d, int64_t ff) {
  matrix(out, p + "gate_proj", ff, d);
  matrix(out, p + "up_proj", ff, d);
  matrix(out, p + "down_proj", d, ff);
}

void embedding_and_head(std::vector<CheckpointTensor>& out, const ModelSpec& s) {
  matrix(out, "model.embed_tokens", s.vocab_size, s.hidden_size);
  if (!s.tie_word_embeddings) matrix(out, "lm_head", s.vocab_size, s.hidden_size);
  vector(out, "model.norm.weight", {s.hidden_size});
}

// DeepseekV3ForCausalLM (also Kimi K2). MLA: queries through a low-rank q_a/q_b pair with a norm
// between (or one q_proj without q_lora_rank), keys and values from one compressed latent
// (kv_a_proj_with_mqa gives the latent and the shared rope key; kv_b_proj expands the latent to
// each head's no-rope key and value). The first first_k_dense_replace layers are dense; the rest
// DeepSeekMoE: a router with a score-correction bias (topk_method noaux_tc), routed experts and
// n_shared_experts fused into one shared expert of n_shared x moe_intermediate_size.
UnservedTensorList deepseek_v3(const ModelSpec& s, const ConfigView& c) {
  UnservedTensorList l;
  l.described_from = "transformers' modeling_deepseek_v3.py";
  constexpr std::string_view why = "needed for the MLA weight shapes";
  const int64_t heads = s.num_heads, d = s.hidden_size;
  const std::optional<int64_t> q_rank = c.optional_int("q_lora_rank");
  const int64_t kv_rank = c.require_int("kv_lora_rank", why);
  const int64_t nope = c.require_int("qk_nope_head_dim", why), rope = c.require_int("qk_rope_head_dim", why);
  const int64_t v_dim = c.require_int("v_head_dim", why);
  const bool score_bias = c.optional_string("topk_method").value_or("") == "noaux_tc";
  auto& out = l.tensors;
  embedding_and_head(out, s);
  for (int64_t i = 0; i < s.num_layers; ++i) {
    const LayerSpec& ls = s.layers[static_cast<size_t>(i)];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    vector(out, p + "input_layernorm.weight", {d});
    vector(out, p + "post_attention_layernorm.weight", {d});
    if (q_rank) {
      matrix(out, p + "self_attn.q_a_proj", *q_rank, d);
      vector(out, p + "self_attn.q_a_layernorm.weight", {*q_rank});
      matrix(out, p + "self_attn.q_b_proj", heads * (nope + rope), *q_rank);
    } else {
      matrix(out, p + "self_attn.q_proj", heads * (nope + rope), d);
    }
    matrix(out, p + "self_attn.kv_a_proj_with_mqa", kv_rank + rope, d);
    vector(out, p + "self_attn.kv_a_layernorm.weight", {kv_rank});
    matrix(out, p + "self_attn.kv_b_proj", heads * (nope + v_dim), kv_rank);
    matrix(out, p + "self_attn.o_proj", d, heads * v_dim);
    if (!ls.moe) {
      gated_ffn(out, p + "mlp.", d, ls.ffn_dim);
      continue;
    }
    matrix(out, p + "mlp.gate", ls.moe->experts, d);
    if (score_bias) vector(out, p + "mlp.gate.e_score_correction_bias", {ls.moe->experts});
    for (int64_t e = 0; e < ls.moe->experts; ++e)
      gated_ffn(out, p + "mlp.experts." + std::to_string(e) + ".", d, ls.moe->expert_ffn_dim);
    if (ls.moe->shared_expert_ffn_dim) gated_ffn(out, p + "mlp.shared_experts.", d, ls.moe->shared_expert_ffn_dim);
  }
  if (auto mtp = c.optional_int("num_nextn_predict_layers"); mtp && *mtp > 0) {
    l.notes.push_back("not counted: " + std::to_string(*mtp) +
                      " multi-token-prediction layer(s) (num_nextn_predict_layers) that checkpoints ship after the " +
                      std::to_string(s.num_layers) + " decoder layers; keel would not run them");
  }
  return l;
}

}  // namespace

std::optional<UnservedTensorList> unserved_tensor_list(const ModelSpec& spec, const ConfigView& config) {
  if (spec.model_type == "deepseek_v3" || spec.model_type == "kimi_k2") return deepseek_v3(spec, config);
  return std::nullopt;
}

}  // namespace keel::plan
