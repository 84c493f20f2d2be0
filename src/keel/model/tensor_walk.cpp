#include "keel/model/tensor_walk.h"

#include <cmath>

namespace keel {
namespace {

// A per-channel vector of `size` that the spec requires (`wanted`), or rules out for `why_not`.
std::vector<float> vector_if(TensorVisitor& t, bool wanted, const std::string& name, int64_t size,
                             const std::string& why_not) {
  if (wanted) return t.floats(name, {size});
  t.absent(name, why_not);
  return {};
}

// The layer's FFN: dense, experts (with a shared expert), or both (Gemma 4).
void walk_ffn(TensorVisitor& t, const ModelSpec& s, const LayerSpec& ls, const TensorNames& n,
              const FamilyLoading& family, const std::string& p, LayerWeights& l) {
  const int64_t d = s.hidden_size;
  if (ls.moe) {
    (family.experts ? family.experts : walk_routed_experts)(t, s, *ls.moe, n, p, l);
    if (const int64_t ff = ls.moe->shared_expert_ffn_dim) {
      const std::string x = p + n.shared_expert;
      l.shared_expert = gated_expert(t.matrix(x + n.expert_gate, ff, d), t.matrix(x + n.expert_up, ff, d),
                                     t.matrix(x + n.expert_down, d, ff));
      l.shared_expert_gate = t.matrix(p + n.shared_expert_gate, 1, d);
    }
    if (!ls.moe->beside_dense) return;
  }
  l.gate = t.matrix(p + n.gate, ls.ffn_dim, d);
  l.up = t.matrix(p + n.up, ls.ffn_dim, d);
  l.down = t.matrix(p + n.down, d, ls.ffn_dim);
}

// A Gated DeltaNet layer's tensors (LinearAttentionWeights).
LinearAttentionWeights walk_linear_attention(TensorVisitor& t, const ModelSpec& s, const LinearAttentionDims& a,
                                             const std::string& p) {
  const int64_t d = s.hidden_size, keys = a.key_heads * a.key_head_dim, values = a.value_heads * a.value_head_dim;
  LinearAttentionWeights w;
  w.in_qkvz = t.matrix(p + "in_proj_qkvz", 2 * keys + 2 * values, d);
  w.in_ba = t.matrix(p + "in_proj_ba", 2 * a.value_heads, d);
  // Hugging Face stores (channels, 1, kernel), mlx-lm (channels, kernel, 1): the same values in
  // the same order (the family's sanitize undoes mlx-lm's other change, its norms).
  w.conv = t.floats(p + "conv1d.weight", {2 * keys + values, 1, a.conv_kernel}, {2 * keys + values, a.conv_kernel, 1});
  w.decay = t.floats(p + "A_log", {a.value_heads});
  for (float& v : w.decay) v = -std::exp(v);
  w.dt_bias = t.floats(p + "dt_bias", {a.value_heads});
  w.norm = t.floats(p + "norm.weight", {a.value_head_dim});
  w.out = t.matrix(p + "out_proj", d, values);
  return w;
}

LayerWeights walk_layer(TensorVisitor& t, const ModelSpec& s, const LayerSpec& ls, const TensorNames& n,
                        const FamilyLoading& family, int64_t i) {
  const std::string p = n.layer_prefix + std::to_string(i) + ".";
  const int64_t d = s.hidden_size;
  LayerWeights l;
  l.attn_norm = t.floats(p + n.attn_norm + ".weight", {d});
  l.ffn_norm = t.floats(p + n.ffn_norm + ".weight", {d});
  if (ls.sandwich_norms) {
    l.post_attn_norm = t.floats(p + n.post_attn_norm + ".weight", {d});
    l.post_ffn_norm = t.floats(p + n.post_ffn_norm + ".weight", {d});
  }
  if (ls.attention == AttentionKind::Linear) {
    l.linear = walk_linear_attention(t, s, *ls.linear, p + n.linear_attn);
    walk_ffn(t, s, ls, n, family, p, l);
    return l;
  }
  l.wq = t.matrix(p + n.q, ls.gated_attention ? 2 * ls.q_dim() : ls.q_dim(), d);
  l.wk = t.matrix(p + n.k, ls.kv_dim(), d);
  if (ls.values_are_keys) t.absent(p + n.v + ".weight", "config.json says attention_k_eq_v");
  else l.wv = t.matrix(p + n.v, ls.kv_dim(), d);
  l.wo = t.matrix(p + n.o, d, ls.q_dim());
  const std::string no_bias = "config.json declares no attention bias for this architecture";
  l.bq = vector_if(t, ls.qkv_bias, p + n.q + ".bias", ls.q_dim(), no_bias);
  l.bk = vector_if(t, ls.qkv_bias, p + n.k + ".bias", ls.kv_dim(), no_bias);
  l.bv = vector_if(t, ls.qkv_bias, p + n.v + ".bias", ls.kv_dim(), no_bias);
  l.bo = vector_if(t, ls.o_bias, p + n.o + ".bias", d, "this architecture has no output-projection bias");
  const std::string no_qk = "this architecture has no q/k norm";
  l.q_norm = vector_if(t, ls.qk_norm, p + n.q_norm + ".weight", ls.head_dim, no_qk);
  l.k_norm = vector_if(t, ls.qk_norm, p + n.k_norm + ".weight", ls.head_dim, no_qk);
  l.sinks = vector_if(t, ls.attention_sinks, p + n.attention_sinks, ls.num_heads, "this architecture has no attention sinks");
  if (ls.layer_scalar)
    if (const std::vector<float> scalar = t.floats(p + n.layer_scalar, {1}); !scalar.empty()) l.layer_scalar = scalar[0];
  walk_ffn(t, s, ls, n, family, p, l);
  return l;
}

}  // namespace

void walk_tensors(TensorVisitor& t, const ModelSpec& s, const TensorNames& names, const FamilyLoading& family,
                  ModelWeights& w) {
  w.embed = t.matrix(names.embed, s.vocab_size, s.hidden_size);
  // Untied, lm_head is required; tied, a stored one is used all the same.
  if (!s.tie_word_embeddings || t.has_matrix(names.lm_head)) w.lm_head = t.matrix(names.lm_head, s.vocab_size, s.hidden_size);
  w.final_norm = t.floats(names.final_norm + ".weight", {s.hidden_size});
  for (int64_t i = 0; i < s.num_layers; ++i)
    w.layers.push_back(walk_layer(t, s, s.layers[static_cast<size_t>(i)], names, family, i));
}

void walk_routed_experts(TensorVisitor& t, const ModelSpec& s, const MoeSpec& moe, const TensorNames& n,
                         const std::string& p, LayerWeights& l) {
  const int64_t d = s.hidden_size, ff = moe.expert_ffn_dim;
  l.router = t.matrix(p + n.router, moe.experts, d);
  l.experts.resize(static_cast<size_t>(moe.experts));
  const std::string stack = p + n.stacked_experts;
  if (t.experts_stacked(stack + n.expert_gate)) {
    auto gate = t.stacked(stack + n.expert_gate, moe.experts, ff, d);
    auto up = t.stacked(stack + n.expert_up, moe.experts, ff, d);
    auto down = t.stacked(stack + n.expert_down, moe.experts, d, ff);
    for (size_t e = 0; e < gate.size(); ++e)
      l.experts[e] = gated_expert(std::move(gate[e]), std::move(up[e]), std::move(down[e]));
    return;
  }
  for (int64_t e = 0; e < moe.experts; ++e) {
    const std::string x = p + n.experts + std::to_string(e) + ".";
    l.experts[static_cast<size_t>(e)] =
        gated_expert(t.matrix(x + n.expert_gate, ff, d), t.matrix(x + n.expert_up, ff, d), t.matrix(x + n.expert_down, d, ff));
  }
}

std::vector<std::vector<float>> per_entry(TensorVisitor& t, const std::string& name, int64_t stack, int64_t size) {
  const std::vector<float> all = t.floats(name, {stack, size});
  std::vector<std::vector<float>> out(static_cast<size_t>(stack));
  if (all.empty()) return out;
  for (int64_t i = 0; i < stack; ++i) out[static_cast<size_t>(i)].assign(all.begin() + i * size, all.begin() + (i + 1) * size);
  return out;
}

Matrix row_half(const Matrix& m, bool first) {
  Matrix h;
  h.name = m.name + (first ? "[:half]" : "[half:]");
  h.format = m.format;
  h.rows = m.rows / 2;
  h.cols = m.cols;
  h.data = m.data + (first ? 0 : static_cast<size_t>(h.rows) * m.row_bytes());
  if (!m.realigned.empty()) {
    h.realigned.assign(h.data, h.data + static_cast<size_t>(h.rows) * h.row_bytes());
    h.data = h.realigned.data();
  }
  return h;
}

ExpertWeights gated_expert(Matrix gate, Matrix up, Matrix down) {
  ExpertWeights e;
  e.gate = std::move(gate);
  e.up = std::move(up);
  e.down = std::move(down);
  return e;
}

}  // namespace keel
