#include "keel/model/weights.h"

#include <cstring>
#include <map>

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
  if (q.bits != 4 && q.bits != 8)
    throw Error(where + ": quantization bits " + std::to_string(q.bits) + " is not supported (4 or 8)");
  if (q.group_size != 32 && q.group_size != 64 && q.group_size != 128)
    throw Error(where + ": quantization group_size " + std::to_string(q.group_size) + " is not supported (32, 64 or 128)");
}

// Loads a per-channel vector the spec requires, or refuses one it rules out.
std::vector<float> vector_if(const TensorIndex& index, bool wanted, const std::string& name, int64_t size,
                             const std::string& why_not) {
  if (wanted) return load_vector(index, name, size);
  if (const auto* e = index.find(name)) tensor_error(*e, "is present but " + why_not);
  return {};
}

LayerWeights load_layer(const TensorIndex& index, const ModelSpec& s, const LayerSpec& ls, const TensorNames& n,
                        int64_t i) {
  const std::string p = n.layer_prefix + std::to_string(i) + ".";
  const auto& q = s.quantization;
  const int64_t d = s.hidden_size;
  LayerWeights l;
  l.attn_norm = load_vector(index, p + n.attn_norm + ".weight", d);
  l.ffn_norm = load_vector(index, p + n.ffn_norm + ".weight", d);
  if (ls.sandwich_norms) {
    l.post_attn_norm = load_vector(index, p + n.post_attn_norm + ".weight", d);
    l.post_ffn_norm = load_vector(index, p + n.post_ffn_norm + ".weight", d);
  }
  l.wq = load_matrix(index, p + n.q, ls.q_dim(), d, q);
  l.wk = load_matrix(index, p + n.k, ls.kv_dim(), d, q);
  l.wv = load_matrix(index, p + n.v, ls.kv_dim(), d, q);
  l.wo = load_matrix(index, p + n.o, d, ls.q_dim(), q);
  const std::string no_bias = "config.json declares no attention bias for this architecture";
  l.bq = vector_if(index, ls.qkv_bias, p + n.q + ".bias", ls.q_dim(), no_bias);
  l.bk = vector_if(index, ls.qkv_bias, p + n.k + ".bias", ls.kv_dim(), no_bias);
  l.bv = vector_if(index, ls.qkv_bias, p + n.v + ".bias", ls.kv_dim(), no_bias);
  l.bo = vector_if(index, ls.o_bias, p + n.o + ".bias", d, "this architecture has no output-projection bias");
  const std::string no_qk = "this architecture has no q/k norm";
  l.q_norm = vector_if(index, ls.qk_norm, p + n.q_norm + ".weight", ls.head_dim, no_qk);
  l.k_norm = vector_if(index, ls.qk_norm, p + n.k_norm + ".weight", ls.head_dim, no_qk);
  l.gate = load_matrix(index, p + n.gate, ls.ffn_dim, d, q);
  l.up = load_matrix(index, p + n.up, ls.ffn_dim, d, q);
  l.down = load_matrix(index, p + n.down, d, ls.ffn_dim, q);
  return l;
}

}  // namespace

ModelWeights load_weights(const std::filesystem::path& dir, ModelSpec spec, const TensorNames& names) {
  if (!std::filesystem::is_directory(dir)) throw Error(dir.string() + ": not a model folder");
  if (spec.quantization) check_quantization(dir, *spec.quantization);
  ModelWeights w;
  w.dir = dir;
  w.spec = std::move(spec);
  w.eos_token_ids = load_eos_token_ids(dir, w.spec);

  TensorIndex index(w);
  for (const auto& f : weight_files(dir)) index.add_file(f);

  const ModelSpec& s = w.spec;
  const auto& q = s.quantization;
  w.embed = load_matrix(index, names.embed, s.vocab_size, s.hidden_size, q);
  if (index.find(names.lm_head + ".weight")) {
    w.lm_head = load_matrix(index, names.lm_head, s.vocab_size, s.hidden_size, q);
  } else if (!s.tie_word_embeddings) {
    throw Error(dir.string() + ": tensor '" + names.lm_head + ".weight' is missing and tie_word_embeddings is false");
  }
  w.final_norm = load_vector(index, names.final_norm + ".weight", s.hidden_size);
  for (int64_t i = 0; i < s.num_layers; ++i)
    w.layers.push_back(load_layer(index, s, s.layers[static_cast<size_t>(i)], names, i));
  return w;
}

}  // namespace keel
