#include "keel/model/weights.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>

#include "keel/model/active_bytes.h"
#include "keel/model/tensor_binding.h"
#include "keel/model/tensor_index.h"
#include "keel/model/weight_index.h"
#include "keel/util/error.h"
#include "keel/util/half.h"

namespace keel {

const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::F32: return "f32";
    case WeightFormat::F16: return "f16";
    case WeightFormat::BF16: return "bf16";
    case WeightFormat::MLX4: return "mlx4";
    case WeightFormat::MLX8: return "mlx8";
    case WeightFormat::MXFP4: return "mxfp4";
    case WeightFormat::Q8_0: return "q8_0";
    case WeightFormat::Q4_0: return "q4_0";
    case WeightFormat::Q5_0: return "q5_0";
    case WeightFormat::Q4_K: return "q4_k";
    case WeightFormat::Q5_K: return "q5_k";
    case WeightFormat::Q6_K: return "q6_k";
    case WeightFormat::MXFP4_GGUF: return "mxfp4-gguf";
  }
  return "?";
}

GgmlBlock ggml_block_size(WeightFormat f) {
  switch (f) {
    case WeightFormat::F32: return {1, 4};
    case WeightFormat::F16:
    case WeightFormat::BF16: return {1, 2};
    case WeightFormat::MLX4:
    case WeightFormat::MLX8:
    case WeightFormat::MXFP4: return {0, 0};
    case WeightFormat::Q8_0: return {32, 34};   // f16 d, 32 x int8
    case WeightFormat::Q4_0: return {32, 18};   // f16 d, 16 bytes of nibbles
    case WeightFormat::Q5_0: return {32, 22};   // f16 d, 4 bytes of high bits, 16 bytes of nibbles
    case WeightFormat::Q4_K: return {256, 144};  // f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, 128 bytes of nibbles
    case WeightFormat::Q5_K: return {256, 176};  // as Q4_K plus 32 bytes of high bits
    case WeightFormat::Q6_K: return {256, 210};  // 128 low nibbles, 64 high 2-bit pairs, 16 int8 scales, f16 d
    case WeightFormat::MXFP4_GGUF: return {32, 17};  // e8m0 exponent, 16 bytes of e2m1 nibbles
  }
  return {0, 0};
}

bool is_ggml_block_format(WeightFormat f) { return f >= WeightFormat::Q8_0; }

size_t Matrix::row_bytes() const {
  switch (format) {
    case WeightFormat::F32: return static_cast<size_t>(cols) * 4;
    case WeightFormat::F16:
    case WeightFormat::BF16: return static_cast<size_t>(cols) * 2;
    case WeightFormat::MLX4:
    case WeightFormat::MLX8: return static_cast<size_t>(cols) * bits() / 8;
    case WeightFormat::MXFP4: return static_cast<size_t>(cols) / 2;
    default: {
      const GgmlBlock b = ggml_block_size(format);
      return static_cast<size_t>(cols / b.elements) * static_cast<size_t>(b.bytes);
    }
  }
}

size_t Matrix::stored_bytes() const {
  size_t b = row_bytes() * static_cast<size_t>(rows);
  if (group_size) b += static_cast<size_t>(rows) * static_cast<size_t>(cols / group_size) * 2 * 2;  // 16-bit scale + bias
  if (format == WeightFormat::MXFP4) b += static_cast<size_t>(rows) * static_cast<size_t>(cols / 32);  // e8m0 exponents
  return b;
}

namespace {

// The layer's matrices every token reads (all but the routed experts).
std::array<const Matrix*, 15> every_token_matrices(const LayerWeights& l) {
  const ExpertWeights& x = l.shared_expert;
  return {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down, &l.router, &x.gate, &x.up, &x.down,
          &l.shared_expert_gate, &l.linear.in_qkvz, &l.linear.in_ba, &l.linear.out};
}

}  // namespace

std::string ModelWeights::formats_text() const {
  std::map<WeightFormat, size_t> bytes;
  auto add = [&](const Matrix& m) {
    if (m.rows) bytes[m.format] += m.stored_bytes();
  };
  add(embed);
  add(lm_head);
  for (const LayerWeights& l : layers) {
    for (const Matrix* m : every_token_matrices(l)) add(*m);
    for (const ExpertWeights& e : l.experts)
      for (const Matrix* m : {&e.gate, &e.up, &e.gate_up, &e.down}) add(*m);
  }
  std::vector<std::pair<size_t, WeightFormat>> order;
  for (const auto& [f, b] : bytes) order.emplace_back(b, f);
  std::sort(order.rbegin(), order.rend());
  std::string out;
  for (const auto& [b, f] : order) out += (out.empty() ? "" : " + ") + std::string(weight_format_name(f));
  return out;
}

DecodeWeightBytes ModelWeights::decode_bytes() const {
  WeightBytesByUse u;
  u.embedding = embed.stored_bytes();
  u.vocab_size = spec.vocab_size;
  u.tied_head = lm_head.rows == 0;
  u.output_head = lm_head.stored_bytes();
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerWeights& l = layers[i];
    for (const Matrix* m : every_token_matrices(l)) u.every_token += m->stored_bytes();
    if (l.experts.empty()) continue;
    RoutedExpertBytes r{0, spec.layers[i].moe->experts, spec.layers[i].moe->experts_per_token};
    for (const ExpertWeights& e : l.experts)
      for (const Matrix* m : {&e.gate, &e.up, &e.gate_up, &e.down}) r.bytes += m->stored_bytes();
    u.routed.push_back(r);
  }
  return decode_weight_bytes(u);
}

void load_routed_experts(const TensorIndex& index, const ModelSpec& s, const MoeSpec& moe, const TensorNames& n,
                         const std::string& p, LayerWeights& l) {
  const int64_t d = s.hidden_size, ff = moe.expert_ffn_dim;
  l.router = load_matrix(index, s, p + n.router, moe.experts, d);
  l.experts.resize(static_cast<size_t>(moe.experts));
  if (index.find(p + n.stacked_experts + n.expert_gate + ".weight")) {
    auto gate = load_matrices(index, s, p + n.stacked_experts + n.expert_gate, moe.experts, ff, d);
    auto up = load_matrices(index, s, p + n.stacked_experts + n.expert_up, moe.experts, ff, d);
    auto down = load_matrices(index, s, p + n.stacked_experts + n.expert_down, moe.experts, d, ff);
    for (size_t e = 0; e < l.experts.size(); ++e)
      l.experts[e] = gated_expert(std::move(gate[e]), std::move(up[e]), std::move(down[e]));
    return;
  }
  for (int64_t e = 0; e < moe.experts; ++e) {
    const std::string x = p + n.experts + std::to_string(e) + ".";
    l.experts[static_cast<size_t>(e)] = gated_expert(load_matrix(index, s, x + n.expert_gate, ff, d),
                                                     load_matrix(index, s, x + n.expert_up, ff, d),
                                                     load_matrix(index, s, x + n.expert_down, d, ff));
  }
}

namespace {

std::vector<std::filesystem::path> weight_files(const std::filesystem::path& dir) {
  if (auto index_path = dir / kWeightIndexName; std::filesystem::exists(index_path)) {
    std::vector<std::filesystem::path> out;
    for (const auto& s : read_weight_index(index_path).shards) out.push_back(dir / s);
    return out;
  }
  if (auto single = dir / "model.safetensors"; std::filesystem::exists(single)) return {single};
  throw Error(dir.string() + ": no weights found (expected model.safetensors or " + kWeightIndexName + ")");
}

void check_quantization(const std::filesystem::path& dir, const MlxQuantization& q) {
  const std::string where = (dir / "config.json").string();
  if (q.mode != "affine")
    throw Error(where + ": quantization mode '" + q.mode + "' is not supported (affine)");
  if (q.bits != 4 && q.bits != 8)
    throw Error(where + ": quantization bits " + std::to_string(q.bits) + " is not supported (4 or 8)");
  if (q.group_size != 32 && q.group_size != 64 && q.group_size != 128)
    throw Error(where + ": quantization group_size " + std::to_string(q.group_size) + " is not supported (32, 64 or 128)");
}

// The layer's FFN: dense, experts (with a shared expert), or both (Gemma 4).
void load_ffn(const TensorIndex& index, const ModelSpec& s, const LayerSpec& ls, const TensorNames& n,
              const FamilyLoading& family, const std::string& p, LayerWeights& l) {
  const int64_t d = s.hidden_size;
  if (ls.moe) {
    (family.experts ? family.experts : load_routed_experts)(index, s, *ls.moe, n, p, l);
    if (const int64_t ff = ls.moe->shared_expert_ffn_dim) {
      const std::string x = p + n.shared_expert;
      l.shared_expert = gated_expert(load_matrix(index, s, x + n.expert_gate, ff, d), load_matrix(index, s, x + n.expert_up, ff, d),
                                     load_matrix(index, s, x + n.expert_down, d, ff));
      l.shared_expert_gate = load_matrix(index, s, p + n.shared_expert_gate, 1, d);
    }
    if (!ls.moe->beside_dense) return;
  }
  l.gate = load_matrix(index, s, p + n.gate, ls.ffn_dim, d);
  l.up = load_matrix(index, s, p + n.up, ls.ffn_dim, d);
  l.down = load_matrix(index, s, p + n.down, d, ls.ffn_dim);
}

// Loads a per-channel vector the spec requires, or refuses one it rules out.
std::vector<float> vector_if(const TensorIndex& index, bool wanted, const std::string& name, int64_t size,
                             const std::string& why_not) {
  if (wanted) return load_vector(index, name, size);
  if (const auto* e = index.find(name)) tensor_error(*e, "is present but " + why_not);
  return {};
}

// A Gated DeltaNet layer's tensors (LinearAttentionWeights).
LinearAttentionWeights load_linear_attention(const TensorIndex& index, const ModelSpec& s, const LinearAttentionDims& a,
                                             const std::string& p) {
  const int64_t d = s.hidden_size, keys = a.key_heads * a.key_head_dim, values = a.value_heads * a.value_head_dim;
  LinearAttentionWeights w;
  w.in_qkvz = load_matrix(index, s, p + "in_proj_qkvz", 2 * keys + 2 * values, d);
  w.in_ba = load_matrix(index, s, p + "in_proj_ba", 2 * a.value_heads, d);
  const auto& conv = index.require(p + "conv1d.weight");
  // Hugging Face stores (channels, 1, kernel), mlx-lm (channels, kernel, 1): the same values in
  // the same order (the family's sanitize undoes mlx-lm's other change, its norms).
  if (conv.shape != std::vector<int64_t>{2 * keys + values, a.conv_kernel, 1})
    expect_shape(conv, {2 * keys + values, 1, a.conv_kernel});
  w.conv = to_floats(conv);
  w.decay = load_vector(index, p + "A_log", a.value_heads);
  for (float& v : w.decay) v = -std::exp(v);
  w.dt_bias = load_vector(index, p + "dt_bias", a.value_heads);
  w.norm = load_vector(index, p + "norm.weight", a.value_head_dim);
  w.out = load_matrix(index, s, p + "out_proj", d, values);
  return w;
}

LayerWeights load_layer(const TensorIndex& index, const ModelSpec& s, const LayerSpec& ls, const TensorNames& n,
                        const FamilyLoading& family, int64_t i) {
  const std::string p = n.layer_prefix + std::to_string(i) + ".";
  const int64_t d = s.hidden_size;
  LayerWeights l;
  l.attn_norm = load_vector(index, p + n.attn_norm + ".weight", d);
  l.ffn_norm = load_vector(index, p + n.ffn_norm + ".weight", d);
  if (ls.sandwich_norms) {
    l.post_attn_norm = load_vector(index, p + n.post_attn_norm + ".weight", d);
    l.post_ffn_norm = load_vector(index, p + n.post_ffn_norm + ".weight", d);
  }
  if (ls.attention == AttentionKind::Linear) {
    l.linear = load_linear_attention(index, s, *ls.linear, p + n.linear_attn);
    load_ffn(index, s, ls, n, family, p, l);
    return l;
  }
  l.wq = load_matrix(index, s, p + n.q, ls.gated_attention ? 2 * ls.q_dim() : ls.q_dim(), d);
  l.wk = load_matrix(index, s, p + n.k, ls.kv_dim(), d);
  if (ls.values_are_keys) {
    if (const auto* e = index.find(p + n.v + ".weight")) tensor_error(*e, "is present but config.json says attention_k_eq_v");
  } else {
    l.wv = load_matrix(index, s, p + n.v, ls.kv_dim(), d);
  }
  l.wo = load_matrix(index, s, p + n.o, d, ls.q_dim());
  const std::string no_bias = "config.json declares no attention bias for this architecture";
  l.bq = vector_if(index, ls.qkv_bias, p + n.q + ".bias", ls.q_dim(), no_bias);
  l.bk = vector_if(index, ls.qkv_bias, p + n.k + ".bias", ls.kv_dim(), no_bias);
  l.bv = vector_if(index, ls.qkv_bias, p + n.v + ".bias", ls.kv_dim(), no_bias);
  l.bo = vector_if(index, ls.o_bias, p + n.o + ".bias", d, "this architecture has no output-projection bias");
  const std::string no_qk = "this architecture has no q/k norm";
  l.q_norm = vector_if(index, ls.qk_norm, p + n.q_norm + ".weight", ls.head_dim, no_qk);
  l.k_norm = vector_if(index, ls.qk_norm, p + n.k_norm + ".weight", ls.head_dim, no_qk);
  l.sinks = vector_if(index, ls.attention_sinks, p + n.attention_sinks, ls.num_heads, "this architecture has no attention sinks");
  if (ls.layer_scalar) {
    const auto& e = index.require(p + n.layer_scalar);
    expect_shape(e, {1});
    l.layer_scalar = to_floats(e).front();
  }
  load_ffn(index, s, ls, n, family, p, l);
  return l;
}

// `names` as given when the folder has their embedding, else re-rooted where it has one; as given
// when none matches, so the error names the tensor the family expects.
TensorNames find_language_model(const TensorIndex& index, const TensorNames& names) {
  if (index.find(names.embed + ".weight")) return names;
  for (std::string_view root : kMultimodalRoots) {
    TensorNames nested = names.rooted_at(root);
    if (index.find(nested.embed + ".weight")) return nested;
  }
  return names;
}

}  // namespace

TensorNames TensorNames::rooted_at(std::string_view root) const {
  constexpr std::string_view plain = "model.";
  auto reroot = [&](const std::string& name) {
    return name.starts_with(plain) ? std::string(root) + name.substr(plain.size()) : name;
  };
  TensorNames n = *this;
  n.embed = reroot(embed);
  n.final_norm = reroot(final_norm);
  n.layer_prefix = reroot(layer_prefix);
  // The head sits beside the decoder: "language_model.lm_head" for language_model.model.*.
  const std::string_view outer = root.substr(0, root.find('.') + 1);
  if (outer != plain) n.lm_head = std::string(outer) + lm_head;
  return n;
}

namespace {

// The tensors of `index` into `w` (its spec already set), under `given_names` or re-rooted names.
void load_tensors(ModelWeights& w, const TensorIndex& index, const TensorNames& given_names,
                  const FamilyLoading& family) {
  const TensorNames names = find_language_model(index, given_names);
  const ModelSpec& s = w.spec;
  w.embed = load_matrix(index, s, names.embed, s.vocab_size, s.hidden_size);
  if (index.find(names.lm_head + ".weight")) {
    w.lm_head = load_matrix(index, s, names.lm_head, s.vocab_size, s.hidden_size);
  } else if (!s.tie_word_embeddings) {
    throw Error(index.where().string() + ": tensor '" + names.lm_head + ".weight' is missing and tie_word_embeddings is false");
  }
  w.final_norm = load_vector(index, names.final_norm + ".weight", s.hidden_size);
  for (int64_t i = 0; i < s.num_layers; ++i)
    w.layers.push_back(load_layer(index, s, s.layers[static_cast<size_t>(i)], names, family, i));
  if (family.sanitize) family.sanitize(index, names, w);
}

}  // namespace

ModelWeights load_weights(const std::filesystem::path& dir, ModelSpec spec, const TensorNames& names,
                          const FamilyLoading& family) {
  if (!std::filesystem::is_directory(dir)) throw Error(dir.string() + ": not a model folder");
  if (spec.quantization) check_quantization(dir, *spec.quantization);
  for (const auto& [module, q] : spec.quantization_overrides)
    if (q.bits) check_quantization(dir, q);
  ModelWeights w;
  w.dir = dir;
  w.spec = std::move(spec);
  w.eos_token_ids = load_eos_token_ids(dir, w.spec);

  TensorIndex index(dir);
  for (const auto& f : weight_files(dir)) {
    w.files.push_back(std::make_unique<SafetensorsFile>(f));
    index.add(*w.files.back());
  }
  load_tensors(w, index, names, family);
  return w;
}

ModelWeights load_gguf_weights(std::vector<std::unique_ptr<gguf::File>> files, ModelSpec spec,
                               const TensorNames& names, const FamilyLoading& family) {
  ModelWeights w;
  w.dir = files.front()->path();
  w.spec = std::move(spec);
  w.eos_token_ids = w.spec.eos_token_ids;
  w.gguf_files = std::move(files);
  TensorIndex index(w.dir);
  for (const auto& f : w.gguf_files) index.add(*f);
  load_tensors(w, index, names, family);
  return w;
}

}  // namespace keel
