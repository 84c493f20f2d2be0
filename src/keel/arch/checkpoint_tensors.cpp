#include "keel/arch/checkpoint_tensors.h"

namespace keel::arch {
namespace {

// Builds the list in load_layer()'s order; each helper names what one loader call reads.
class TensorList {
 public:
  explicit TensorList(std::vector<CheckpointTensor>& out) : out_(out) {}

  // load_matrix(): a linear or embedding weight, dense or MLX affine.
  void matrix(const std::string& module, int64_t rows, int64_t cols) {
    out_.push_back({module, {rows, cols}, true, true, kStoredFloat | kStoredMlxAffine});
  }
  // load_matrices() with a stack: MLX's stacked experts.
  void stacked(const std::string& module, int64_t stack, int64_t rows, int64_t cols) {
    out_.push_back({module, {stack, rows, cols}, true, true, kStoredFloat | kStoredMlxAffine});
  }
  // load_stacked_dense(): stacked experts named without ".weight", dense only (Gemma 4).
  void stacked_dense(const std::string& name, int64_t stack, int64_t rows, int64_t cols) {
    out_.push_back({name, {stack, rows, cols}, true, false, kStoredFloat});
  }
  // load_mxfp4_matrices(): gpt-oss experts, MXFP4 only.
  void stacked_mxfp4(const std::string& module, int64_t stack, int64_t rows, int64_t cols) {
    out_.push_back({module, {stack, rows, cols}, true, true, kStoredMxfp4});
  }
  // load_vector(), load_stacked_vectors() and the layer scalar: never quantized.
  void vector(const std::string& name, std::vector<int64_t> shape) {
    out_.push_back({name, std::move(shape), false, false, kStoredFloat});
  }

 private:
  std::vector<CheckpointTensor>& out_;
};

void experts(TensorList& t, const ModelSpec& s, const MoeSpec& moe, const TensorNames& n, const std::string& p,
             bool mlx_stacked) {
  const int64_t d = s.hidden_size, ff = moe.expert_ffn_dim, count = moe.experts;
  if (!n.expert_gate_up.empty()) {  // load_fused_experts
    t.matrix(p + n.router, count, d);
    t.vector(p + n.router + ".bias", {count});
    const std::string gate_up = p + n.stacked_experts + n.expert_gate_up, down = p + n.stacked_experts + n.expert_down;
    t.stacked_mxfp4(gate_up, count, 2 * ff, d);
    t.stacked_mxfp4(down, count, d, ff);
    t.vector(gate_up + "_bias", {count, 2 * ff});
    t.vector(down + "_bias", {count, d});
    return;
  }
  if (moe.beside_dense) {  // load_experts_beside_dense
    t.matrix(p + n.router_proj, count, d);
    t.vector(p + n.router_scale, {d});
    t.vector(p + n.router_expert_scale, {count});
    t.vector(p + n.post_dense_norm + ".weight", {d});
    t.vector(p + n.pre_moe_norm + ".weight", {d});
    t.vector(p + n.post_moe_norm + ".weight", {d});
    t.stacked_dense(p + n.experts_gate_up_halves, count, 2 * ff, d);
    t.stacked_dense(p + n.experts_down, count, d, ff);
    return;
  }
  t.matrix(p + n.router, count, d);
  if (mlx_stacked) {
    t.stacked(p + n.stacked_experts + n.expert_gate, count, ff, d);
    t.stacked(p + n.stacked_experts + n.expert_up, count, ff, d);
    t.stacked(p + n.stacked_experts + n.expert_down, count, d, ff);
    return;
  }
  for (int64_t e = 0; e < count; ++e) {
    const std::string x = p + n.experts + std::to_string(e) + ".";
    t.matrix(x + n.expert_gate, ff, d);
    t.matrix(x + n.expert_up, ff, d);
    t.matrix(x + n.expert_down, d, ff);
  }
}

// load_ffn(): dense, experts and a shared expert, or both (Gemma 4).
void ffn(TensorList& t, const ModelSpec& s, const LayerSpec& ls, const TensorNames& n, const std::string& p, bool mlx_stacked) {
  const int64_t d = s.hidden_size;
  if (ls.moe) {
    experts(t, s, *ls.moe, n, p, mlx_stacked);
    if (const int64_t ff = ls.moe->shared_expert_ffn_dim) {
      const std::string x = p + n.shared_expert;
      t.matrix(x + n.expert_gate, ff, d);
      t.matrix(x + n.expert_up, ff, d);
      t.matrix(x + n.expert_down, d, ff);
      t.matrix(p + n.shared_expert_gate, 1, d);
    }
    if (!ls.moe->beside_dense) return;
  }
  t.matrix(p + n.gate, ls.ffn_dim, d);
  t.matrix(p + n.up, ls.ffn_dim, d);
  t.matrix(p + n.down, d, ls.ffn_dim);
}

void layer(TensorList& t, const ModelSpec& s, const LayerSpec& ls, const TensorNames& n, int64_t i, bool mlx_stacked) {
  const std::string p = n.layer_prefix + std::to_string(i) + ".";
  const int64_t d = s.hidden_size;
  t.vector(p + n.attn_norm + ".weight", {d});
  t.vector(p + n.ffn_norm + ".weight", {d});
  if (ls.sandwich_norms) {
    t.vector(p + n.post_attn_norm + ".weight", {d});
    t.vector(p + n.post_ffn_norm + ".weight", {d});
  }
  if (ls.attention == AttentionKind::Linear) {  // load_linear_attention
    const LinearAttentionDims& a = *ls.linear;
    const int64_t keys = a.key_heads * a.key_head_dim, values = a.value_heads * a.value_head_dim;
    const std::string x = p + n.linear_attn;
    t.matrix(x + "in_proj_qkvz", 2 * keys + 2 * values, d);
    t.matrix(x + "in_proj_ba", 2 * a.value_heads, d);
    t.vector(x + "conv1d.weight", {2 * keys + values, 1, a.conv_kernel});
    t.vector(x + "A_log", {a.value_heads});
    t.vector(x + "dt_bias", {a.value_heads});
    t.vector(x + "norm.weight", {a.value_head_dim});
    t.matrix(x + "out_proj", d, values);
    ffn(t, s, ls, n, p, mlx_stacked);
    return;
  }
  t.matrix(p + n.q, ls.gated_attention ? 2 * ls.q_dim() : ls.q_dim(), d);
  t.matrix(p + n.k, ls.kv_dim(), d);
  if (!ls.values_are_keys) t.matrix(p + n.v, ls.kv_dim(), d);
  t.matrix(p + n.o, d, ls.q_dim());
  if (ls.qkv_bias) {
    t.vector(p + n.q + ".bias", {ls.q_dim()});
    t.vector(p + n.k + ".bias", {ls.kv_dim()});
    t.vector(p + n.v + ".bias", {ls.kv_dim()});
  }
  if (ls.o_bias) t.vector(p + n.o + ".bias", {d});
  if (ls.qk_norm) {
    t.vector(p + n.q_norm + ".weight", {ls.head_dim});
    t.vector(p + n.k_norm + ".weight", {ls.head_dim});
  }
  if (ls.attention_sinks) t.vector(p + n.attention_sinks, {ls.num_heads});
  if (ls.layer_scalar) t.vector(p + n.layer_scalar, {1});
  ffn(t, s, ls, n, p, mlx_stacked);
}

}  // namespace

int64_t CheckpointTensor::elements() const {
  int64_t n = 1;
  for (int64_t dim : shape) n *= dim;
  return n;
}

std::vector<CheckpointTensor> checkpoint_tensors(const ModelSpec& spec, const TensorNames& names,
                                                 bool mlx_stacked_experts) {
  std::vector<CheckpointTensor> out;
  TensorList t(out);
  t.matrix(names.embed, spec.vocab_size, spec.hidden_size);
  if (!spec.tie_word_embeddings) t.matrix(names.lm_head, spec.vocab_size, spec.hidden_size);
  t.vector(names.final_norm + ".weight", {spec.hidden_size});
  for (int64_t i = 0; i < spec.num_layers; ++i)
    layer(t, spec, spec.layers[static_cast<size_t>(i)], names, i, mlx_stacked_experts);
  return out;
}

}  // namespace keel::arch
