#include "keel/model/weights.h"

#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

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
  }
  return "?";
}

size_t Matrix::row_bytes() const {
  switch (format) {
    case WeightFormat::F32: return static_cast<size_t>(cols) * 4;
    case WeightFormat::F16:
    case WeightFormat::BF16: return static_cast<size_t>(cols) * 2;
    case WeightFormat::MLX4:
    case WeightFormat::MLX8: return static_cast<size_t>(cols) * bits() / 8;
  }
  return 0;
}

size_t Matrix::stored_bytes() const {
  size_t b = row_bytes() * static_cast<size_t>(rows);
  if (group_size) b += static_cast<size_t>(rows) * static_cast<size_t>(cols / group_size) * 2 * 2;  // 16-bit scale + bias
  return b;
}

size_t ModelWeights::weight_bytes_per_token() const {
  size_t b = output().stored_bytes();
  for (const auto& l : layers)
    for (const Matrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down}) b += m->stored_bytes();
  return b;
}

namespace {

// Finds tensors by name across the files of a checkpoint.
class TensorIndex {
 public:
  explicit TensorIndex(ModelWeights& w) : w_(w) {}

  void add_file(const std::filesystem::path& path) {
    w_.files.push_back(std::make_unique<SafetensorsFile>(path));
    const SafetensorsFile* f = w_.files.back().get();
    for (const auto& t : f->header().tensors) {
      auto [it, inserted] = by_name_.emplace(t.name, Entry{f, &t});
      if (!inserted)
        throw Error(path.string() + ": tensor '" + t.name + "' also appears in " + it->second.file->path().string());
    }
  }

  struct Entry {
    const SafetensorsFile* file;
    const TensorInfo* info;
  };

  const Entry* find(const std::string& name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &it->second;
  }

  const Entry& require(const std::string& name) const {
    if (const Entry* e = find(name)) return *e;
    throw Error(w_.dir.string() + ": tensor '" + name + "' is missing from the weights");
  }

 private:
  ModelWeights& w_;
  std::map<std::string, Entry> by_name_;
};

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

[[noreturn]] void tensor_error(const TensorIndex::Entry& e, const std::string& what) {
  throw Error(e.file->path().string() + ": tensor '" + e.info->name + "': " + what);
}

void expect_shape(const TensorIndex::Entry& e, const std::vector<int64_t>& shape) {
  if (e.info->shape != shape)
    tensor_error(e, "shape " + shape_string(e.info->shape) + ", expected " + shape_string(shape));
}

std::vector<float> to_floats(const TensorIndex::Entry& e) {
  auto bytes = e.file->data(*e.info);
  size_t n = e.info->element_count();
  std::vector<float> out(n);
  switch (e.info->dtype) {
    case DType::F32:
      std::memcpy(out.data(), bytes.data(), n * 4);
      break;
    case DType::F16:
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes.data() + 2 * i, 2);
        out[i] = e.info->dtype == DType::F16 ? f16_to_float(h) : bf16_to_float(h);
      }
      break;
    default:
      tensor_error(e, "dtype " + std::string(dtype_name(e.info->dtype)) + " is not supported here (F32, F16 or BF16)");
  }
  return out;
}

std::vector<float> load_vector(const TensorIndex& index, const std::string& name, int64_t size) {
  const auto& e = index.require(name);
  expect_shape(e, {size});
  return to_floats(e);
}

std::vector<float> load_optional_vector(const TensorIndex& index, const std::string& name, int64_t size) {
  if (!index.find(name)) return {};
  return load_vector(index, name, size);
}

// Points the matrix at its bytes in the mapping, copying only if they are misaligned for the
// element type (possible in hand-made files; the kernels read whole elements).
void attach_data(Matrix& m, std::span<const uint8_t> bytes, size_t alignment) {
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignment == 0) {
    m.data = bytes.data();
    return;
  }
  m.realigned.assign(bytes.begin(), bytes.end());
  m.data = m.realigned.data();
}

Matrix load_matrix(const TensorIndex& index, const std::string& prefix, int64_t rows, int64_t cols,
                   const std::optional<MlxQuantization>& quant) {
  Matrix m;
  m.name = prefix + ".weight";
  m.rows = rows;
  m.cols = cols;
  const auto& w = index.require(m.name);
  const auto* scales = index.find(prefix + ".scales");

  if (scales) {
    if (!quant) tensor_error(w, "has MLX scales but config.json has no quantization block");
    const int bits = quant->bits;
    const int group = quant->group_size;
    if (w.info->dtype != DType::U32)
      tensor_error(w, "MLX-quantized weight must be U32, got " + std::string(dtype_name(w.info->dtype)));
    if (cols % group != 0 || (cols * bits) % 32 != 0)
      tensor_error(w, "input size " + std::to_string(cols) + " is not a multiple of the group size " + std::to_string(group));
    expect_shape(w, {rows, cols * bits / 32});
    const auto& biases = index.require(prefix + ".biases");
    expect_shape(*scales, {rows, cols / group});
    expect_shape(biases, {rows, cols / group});
    m.format = bits == 4 ? WeightFormat::MLX4 : WeightFormat::MLX8;
    m.group_size = group;
    m.scales = to_floats(*scales);
    m.biases = to_floats(biases);
    // Kernels load a whole SIMD vector of scales at a time; padding keeps the last row's in bounds.
    m.scales.resize(m.scales.size() + kMlxScalePadding, 0.0f);
    m.biases.resize(m.biases.size() + kMlxScalePadding, 0.0f);
    attach_data(m, w.file->data(*w.info), 4);
    return m;
  }

  expect_shape(w, {rows, cols});
  switch (w.info->dtype) {
    case DType::F32: m.format = WeightFormat::F32; break;
    case DType::F16: m.format = WeightFormat::F16; break;
    case DType::BF16: m.format = WeightFormat::BF16; break;
    default:
      tensor_error(w, "dtype " + std::string(dtype_name(w.info->dtype)) +
                          " is not supported (F32, F16, BF16, or U32 with MLX scales and biases)");
  }
  attach_data(m, w.file->data(*w.info), m.format == WeightFormat::F32 ? 4 : 2);
  return m;
}

std::vector<std::filesystem::path> weight_files(const std::filesystem::path& dir) {
  auto single = dir / "model.safetensors";
  auto index_path = dir / "model.safetensors.index.json";
  if (std::filesystem::exists(index_path)) {
    std::ifstream in(index_path);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      throw Error(index_path.string() + ": not valid JSON with a 'weight_map' object");
    std::set<std::string> shards;
    for (const auto& [name, file] : j["weight_map"].items()) {
      if (!file.is_string()) throw Error(index_path.string() + ": weight_map entry '" + name + "' is not a file name");
      std::string f = file.get<std::string>();
      if (f.find('/') != std::string::npos || f.find("..") != std::string::npos)
        throw Error(index_path.string() + ": shard name '" + f + "' must be a plain file name in the folder");
      shards.insert(f);
    }
    std::vector<std::filesystem::path> out;
    for (const auto& s : shards) out.push_back(dir / s);
    return out;
  }
  if (std::filesystem::exists(single)) return {single};
  throw Error(dir.string() + ": no weights found (expected model.safetensors or model.safetensors.index.json)");
}

}  // namespace

ModelWeights load_model(const std::filesystem::path& dir) {
  if (!std::filesystem::is_directory(dir)) throw Error(dir.string() + ": not a model folder");
  ModelWeights w;
  w.dir = dir;
  auto config = dir / "config.json";
  if (!std::filesystem::exists(config)) throw Error(config.string() + ": not found (every model folder needs config.json)");
  w.spec = read_model_spec(config);
  w.eos_token_ids = load_eos_token_ids(dir, w.spec);

  TensorIndex index(w);
  for (const auto& f : weight_files(dir)) index.add_file(f);

  const ModelSpec& s = w.spec;
  const auto& q = s.quantization;
  w.embed = load_matrix(index, "model.embed_tokens", s.vocab_size, s.hidden_size, q);
  if (index.find("lm_head.weight")) {
    w.lm_head = load_matrix(index, "lm_head", s.vocab_size, s.hidden_size, q);
  } else if (!s.tie_word_embeddings) {
    throw Error(dir.string() + ": tensor 'lm_head.weight' is missing and tie_word_embeddings is false");
  }
  w.final_norm = load_vector(index, "model.norm.weight", s.hidden_size);

  for (int64_t i = 0; i < s.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerWeights l;
    l.attn_norm = load_vector(index, p + "input_layernorm.weight", s.hidden_size);
    l.mlp_norm = load_vector(index, p + "post_attention_layernorm.weight", s.hidden_size);
    l.wq = load_matrix(index, p + "self_attn.q_proj", s.q_dim(), s.hidden_size, q);
    l.wk = load_matrix(index, p + "self_attn.k_proj", s.kv_dim(), s.hidden_size, q);
    l.wv = load_matrix(index, p + "self_attn.v_proj", s.kv_dim(), s.hidden_size, q);
    l.wo = load_matrix(index, p + "self_attn.o_proj", s.hidden_size, s.q_dim(), q);
    l.bq = load_optional_vector(index, p + "self_attn.q_proj.bias", s.q_dim());
    l.bk = load_optional_vector(index, p + "self_attn.k_proj.bias", s.kv_dim());
    l.bv = load_optional_vector(index, p + "self_attn.v_proj.bias", s.kv_dim());
    if (index.find(p + "self_attn.o_proj.bias"))
      throw Error(dir.string() + ": tensor '" + p + "self_attn.o_proj.bias' (output-projection bias) is not supported");
    if (s.qk_norm) {
      l.q_norm = load_vector(index, p + "self_attn.q_norm.weight", s.head_dim);
      l.k_norm = load_vector(index, p + "self_attn.k_norm.weight", s.head_dim);
    }
    l.gate = load_matrix(index, p + "mlp.gate_proj", s.intermediate_size, s.hidden_size, q);
    l.up = load_matrix(index, p + "mlp.up_proj", s.intermediate_size, s.hidden_size, q);
    l.down = load_matrix(index, p + "mlp.down_proj", s.hidden_size, s.intermediate_size, q);
    w.layers.push_back(std::move(l));
  }
  return w;
}

}  // namespace keel
