// Gemma 3 text (Gemma3ForCausalLM; also the text_config of Gemma3ForConditionalGeneration folders,
// whose nested language model load_weights finds): embeddings scaled by sqrt(hidden_size); RMSNorm
// with a (1 + w) weight; four norms per layer (before and after attention, before and after the
// FFN); q/k norm; softmax scale query_pre_attn_scalar^-1/2; sliding layers use
// rope_local_base_freq without scaling, global layers rope_theta with rope_scaling; GELU (tanh
// approximation) gated FFN; the head tied to the embeddings unless the config unties it.
#include <cmath>

#include "keel/arch/family.h"

namespace keel::arch {
namespace {

void refine(const ConfigView& c, ModelSpec& spec) {
  const std::string act = c.optional_string("hidden_activation").value_or(c.optional_string("hidden_act").value_or("gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh" && act != "gelu_tanh")
    c.fail("hidden_activation", "is '" + act + "'; keel runs Gemma 3 with gelu_pytorch_tanh only");
  // transformers' Gemma3TextConfig ties the head to the embeddings unless the config says
  // otherwise, and real checkpoints (medgemma-27b-it) leave the key out and ship no lm_head.
  spec.tie_word_embeddings = c.optional_bool("tie_word_embeddings").value_or(true);
  spec.norm = NormKind::RmsUnitOffset;
  spec.embedding_scale = std::sqrt(static_cast<double>(spec.hidden_size));
  const double local_theta = c.optional_number("rope_local_base_freq").value_or(10000.0);
  for (LayerSpec& l : spec.layers) {
    const double scalar = c.optional_number("query_pre_attn_scalar").value_or(static_cast<double>(l.head_dim));
    if (scalar <= 0) c.fail("query_pre_attn_scalar", "must be positive");
    l.attention_scale = 1.0 / std::sqrt(scalar);
    l.qk_norm = true;
    l.sandwich_norms = true;
    l.activation = Activation::GeluTanh;
    if (l.attention == AttentionKind::Sliding) l.rope = RopeSpec{local_theta, {}};
  }
}

TensorNames tensor_names() {
  TensorNames n;
  n.post_attn_norm = "post_attention_layernorm";
  n.ffn_norm = "pre_feedforward_layernorm";
  n.post_ffn_norm = "post_feedforward_layernorm";
  return n;
}

}  // namespace

extern const Family kGemma3Text{"gemma3_text", refine, tensor_names};

}  // namespace keel::arch
