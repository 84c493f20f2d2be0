#include "keel/model/weights.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>

#include "keel/model/active_bytes.h"
#include "keel/model/tensor_binding.h"
#include "keel/model/tensor_index.h"
#include "keel/model/tensor_walk.h"
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

// The layer's matrices every token reads (all but the routed experts); Layer is LayerWeights or
// const LayerWeights.
template <class Layer>
auto every_token_matrices(Layer& l) {
  auto& x = l.shared_expert;
  return std::array{&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down, &l.router, &x.gate, &x.up, &x.down,
                    &l.shared_expert_gate, &l.linear.in_qkvz, &l.linear.in_ba, &l.linear.out};
}

}  // namespace

void for_each_matrix(ModelWeights& w, const std::function<void(Matrix&)>& f) {
  f(w.embed);
  f(w.lm_head);
  for (LayerWeights& l : w.layers) {
    for (Matrix* m : every_token_matrices(l)) f(*m);
    for (ExpertWeights& e : l.experts)
      for (Matrix* m : {&e.gate, &e.up, &e.gate_up, &e.down}) f(*m);
  }
}

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

ModelWeights::MatmulMacs ModelWeights::matmul_macs() const {
  auto macs = [](const Matrix& m) { return static_cast<double>(m.rows) * static_cast<double>(m.cols); };
  MatmulMacs out;
  out.head = macs(output());
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerWeights& l = layers[i];
    for (const Matrix* m : every_token_matrices(l)) out.per_token += macs(*m);
    if (l.experts.empty()) continue;
    double experts = 0;
    for (const ExpertWeights& e : l.experts)
      for (const Matrix* m : {&e.gate, &e.up, &e.gate_up, &e.down}) experts += macs(*m);
    out.per_token += experts / static_cast<double>(l.experts.size()) * spec.layers[i].moe->experts_per_token;
  }
  return out;
}

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

// The tensors of `index` into `w` (its spec already set), under `given_names` or re-rooted names.
void load_tensors(ModelWeights& w, const TensorIndex& index, const TensorNames& given_names,
                  const FamilyLoading& family) {
  const TensorNames names = find_language_model(index, given_names);
  BoundTensors bound(index, w.spec);
  walk_tensors(bound, w.spec, names, family, w);
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

ModelWeights load_gguf_weights(std::vector<std::shared_ptr<const gguf::File>> files, ModelSpec spec,
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
