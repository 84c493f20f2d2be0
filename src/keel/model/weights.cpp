#include "keel/model/weights.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>

#include "keel/model/active_bytes.h"
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

namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

[[noreturn]] void tensor_error(const StoredTensor& e, const std::string& what) {
  throw Error(e.file->string() + ": tensor '" + e.name + "': " + what);
}

void expect_shape(const StoredTensor& e, const std::vector<int64_t>& shape) {
  if (e.shape != shape) tensor_error(e, "shape " + shape_string(e.shape) + ", expected " + shape_string(shape));
}

std::vector<float> to_floats(const StoredTensor& e) {
  if (!e.dtype) tensor_error(e, "type " + e.type_name + " is not supported here (F32, F16 or BF16)");
  auto bytes = e.bytes;
  size_t n = e.element_count();
  std::vector<float> out(n);
  switch (*e.dtype) {
    case DType::F32:
      std::memcpy(out.data(), bytes.data(), n * 4);
      break;
    case DType::F16:
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes.data() + 2 * i, 2);
        out[i] = e.dtype == DType::F16 ? f16_to_float(h) : bf16_to_float(h);
      }
      break;
    default:
      tensor_error(e, "dtype " + e.type_name + " is not supported here (F32, F16 or BF16)");
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

// The alignment the kernels need of a matrix's first byte: whole elements for the float formats
// and MLX's U32 words; the ggml block formats are read bytewise (their blocks are 17-210 bytes).
size_t element_alignment(WeightFormat f) {
  switch (f) {
    case WeightFormat::F16:
    case WeightFormat::BF16: return 2;
    case WeightFormat::F32:
    case WeightFormat::MLX4:
    case WeightFormat::MLX8: return 4;
    default: return 1;
  }
}

// The quantization of one module: its per-module override, else the model's; nullopt when the
// module is stored unquantized.
std::optional<MlxQuantization> quantization_of(const ModelSpec& spec, const std::string& module) {
  if (auto it = spec.quantization_overrides.find(module); it != spec.quantization_overrides.end())
    return it->second.bits ? std::optional<MlxQuantization>(it->second) : std::nullopt;
  return spec.quantization;
}

// The matrices of one tensor `prefix`.weight: a (rows, cols) weight, or with `stack` > 0 a
// (stack, rows, cols) tensor of `stack` matrices (MLX's stacked experts), each used in place.
std::vector<Matrix> load_matrices(const TensorIndex& index, const ModelSpec& spec, const std::string& prefix,
                                  int64_t stack, int64_t rows, int64_t cols) {
  const std::string name = prefix + ".weight";
  const auto& w = index.require(name);
  const auto* scales = index.find(prefix + ".scales");
  auto shape = [&](int64_t last) {
    std::vector<int64_t> sh;
    if (stack) sh.push_back(stack);
    sh.push_back(rows);
    sh.push_back(last);
    return sh;
  };

  WeightFormat format = WeightFormat::F32;
  int group = 0;
  std::vector<float> all_scales, all_biases;  // (stack, rows, cols / group)
  if (scales) {
    const auto quant = quantization_of(spec, prefix);
    if (!quant)
      tensor_error(w, spec.quantization ? "has MLX scales but config.json's quantization marks it unquantized"
                                        : "has MLX scales but config.json has no quantization block");
    const int bits = quant->bits;
    group = quant->group_size;
    if (w.dtype != DType::U32) tensor_error(w, "MLX-quantized weight must be U32, got " + w.type_name);
    if (cols % group != 0 || (cols * bits) % 32 != 0)
      tensor_error(w, "input size " + std::to_string(cols) + " is not a multiple of the group size " + std::to_string(group));
    expect_shape(w, shape(cols * bits / 32));
    const auto& biases = index.require(prefix + ".biases");
    expect_shape(*scales, shape(cols / group));
    expect_shape(biases, shape(cols / group));
    format = bits == 4 ? WeightFormat::MLX4 : WeightFormat::MLX8;
    all_scales = to_floats(*scales);
    all_biases = to_floats(biases);
  } else if (w.blocks) {  // GGUF: rows of ggml blocks
    expect_shape(w, shape(cols));
    format = *w.blocks;
  } else {
    expect_shape(w, shape(cols));
    switch (w.dtype.value_or(DType::U8)) {
      case DType::F32: format = WeightFormat::F32; break;
      case DType::F16: format = WeightFormat::F16; break;
      case DType::BF16: format = WeightFormat::BF16; break;
      default:
        tensor_error(w, "type " + w.type_name + " is not supported (F32, F16, BF16, U32 with MLX scales and biases, " +
                            "or the GGUF types Q8_0, Q4_0, Q5_0, Q4_K, Q5_K, Q6_K, MXFP4)");
    }
  }

  const auto bytes = w.bytes;
  const int64_t count = stack ? stack : 1;
  std::vector<Matrix> out(static_cast<size_t>(count));
  for (int64_t e = 0; e < count; ++e) {
    Matrix& m = out[static_cast<size_t>(e)];
    m.name = stack ? name + "[" + std::to_string(e) + "]" : name;
    m.format = format;
    m.rows = rows;
    m.cols = cols;
    const size_t size = m.row_bytes() * static_cast<size_t>(rows);
    if (group) {
      m.group_size = group;
      const auto per = static_cast<ptrdiff_t>(rows * (cols / group));
      m.scales.assign(all_scales.begin() + e * per, all_scales.begin() + (e + 1) * per);
      m.biases.assign(all_biases.begin() + e * per, all_biases.begin() + (e + 1) * per);
      // Kernels load a whole SIMD vector of scales at a time; padding keeps the last row's in bounds.
      m.scales.resize(m.scales.size() + kMlxScalePadding, 0.0f);
      m.biases.resize(m.biases.size() + kMlxScalePadding, 0.0f);
    }
    attach_data(m, bytes.subspan(static_cast<size_t>(e) * size, size), element_alignment(format));
  }
  return out;
}

Matrix load_matrix(const TensorIndex& index, const ModelSpec& spec, const std::string& prefix, int64_t rows,
                   int64_t cols) {
  return std::move(load_matrices(index, spec, prefix, 0, rows, cols).front());
}

ExpertWeights gated_expert(Matrix gate, Matrix up, Matrix down) {
  ExpertWeights e;
  e.gate = std::move(gate);
  e.up = std::move(up);
  e.down = std::move(down);
  return e;
}

// gpt-oss's MXFP4 experts as OpenAI ships them: `prefix`_blocks U8 (stack, rows, cols/32, 16) and
// `prefix`_scales U8 (stack, rows, cols/32), used in place.
std::vector<Matrix> load_mxfp4_matrices(const TensorIndex& index, const std::string& prefix, int64_t stack,
                                        int64_t rows, int64_t cols) {
  const auto& blocks = index.require(prefix + "_blocks");
  const auto& scales = index.require(prefix + "_scales");
  if (blocks.dtype != DType::U8 || scales.dtype != DType::U8)
    tensor_error(blocks, "MXFP4 blocks and scales must be U8");
  if (cols % 32 != 0) tensor_error(blocks, "input size " + std::to_string(cols) + " is not a multiple of 32");
  expect_shape(blocks, {stack, rows, cols / 32, 16});
  expect_shape(scales, {stack, rows, cols / 32});
  const auto block_bytes = blocks.bytes;
  const auto scale_bytes = scales.bytes;
  std::vector<Matrix> out(static_cast<size_t>(stack));
  for (int64_t e = 0; e < stack; ++e) {
    Matrix& m = out[static_cast<size_t>(e)];
    m.name = prefix + "[" + std::to_string(e) + "]";
    m.format = WeightFormat::MXFP4;
    m.rows = rows;
    m.cols = cols;
    m.data = block_bytes.data() + static_cast<size_t>(e * rows * cols / 2);
    m.block_exponents = scale_bytes.data() + static_cast<size_t>(e * rows * cols / 32);
  }
  return out;
}

// (stack, size) per-expert bias vectors.
std::vector<std::vector<float>> load_stacked_vectors(const TensorIndex& index, const std::string& name, int64_t stack,
                                                     int64_t size) {
  const auto& e = index.require(name);
  expect_shape(e, {stack, size});
  const std::vector<float> all = to_floats(e);
  std::vector<std::vector<float>> out;
  for (int64_t i = 0; i < stack; ++i) out.emplace_back(all.begin() + i * size, all.begin() + (i + 1) * size);
  return out;
}

// Stacked dense matrices (stack, rows, cols) named without ".weight" (Gemma 4's experts), each
// used in place.
std::vector<Matrix> load_stacked_dense(const TensorIndex& index, const std::string& name, int64_t stack, int64_t rows,
                                       int64_t cols) {
  const auto& t = index.require(name);
  expect_shape(t, {stack, rows, cols});
  WeightFormat format = WeightFormat::BF16;
  switch (t.dtype.value_or(DType::U8)) {
    case DType::F32: format = WeightFormat::F32; break;
    case DType::F16: format = WeightFormat::F16; break;
    case DType::BF16: format = WeightFormat::BF16; break;
    default: tensor_error(t, "type " + t.type_name + " is not supported (F32, F16 or BF16)");
  }
  const auto bytes = t.bytes;
  std::vector<Matrix> out(static_cast<size_t>(stack));
  for (int64_t e = 0; e < stack; ++e) {
    Matrix& m = out[static_cast<size_t>(e)];
    m.name = name + "[" + std::to_string(e) + "]";
    m.format = format;
    m.rows = rows;
    m.cols = cols;
    const size_t size = m.row_bytes() * static_cast<size_t>(rows);
    attach_data(m, bytes.subspan(static_cast<size_t>(e) * size, size), format == WeightFormat::F32 ? 4 : 2);
  }
  return out;
}

// The first (`first` true) or second half of a matrix's rows, in place.
Matrix row_half(const Matrix& m, bool first) {
  Matrix h;
  h.name = m.name + (first ? "[:half]" : "[half:]");
  h.format = m.format;
  h.rows = m.rows / 2;
  h.cols = m.cols;
  h.data = m.data + (first ? 0 : static_cast<size_t>(h.rows) * m.row_bytes());
  return h;
}

// Gemma 4: experts beside the dense FFN, gate and up the halves of one stacked tensor; the router
// with its input scale and per-expert scale, and the two branches' norms.
void load_experts_beside_dense(const TensorIndex& index, const ModelSpec& s, const MoeSpec& moe, const TensorNames& n,
                               const std::string& p, LayerWeights& l) {
  const int64_t d = s.hidden_size, ff = moe.expert_ffn_dim, count = moe.experts;
  l.router = load_matrix(index, s, p + n.router_proj, count, d);
  l.router_scale = load_vector(index, p + n.router_scale, d);
  l.expert_scale = load_vector(index, p + n.router_expert_scale, count);
  l.post_dense_norm = load_vector(index, p + n.post_dense_norm + ".weight", d);
  l.pre_moe_norm = load_vector(index, p + n.pre_moe_norm + ".weight", d);
  l.post_moe_norm = load_vector(index, p + n.post_moe_norm + ".weight", d);
  auto gate_up = load_stacked_dense(index, p + n.experts_gate_up_halves, count, 2 * ff, d);
  auto down = load_stacked_dense(index, p + n.experts_down, count, d, ff);
  l.experts.resize(static_cast<size_t>(count));
  for (size_t e = 0; e < l.experts.size(); ++e) {
    if (!gate_up[e].realigned.empty())  // halves point into the original rows, so keep them in place
      tensor_error(index.require(p + n.experts_gate_up_halves), "is misaligned in the file");
    l.experts[e] = gated_expert(row_half(gate_up[e], true), row_half(gate_up[e], false), std::move(down[e]));
  }
}

// gpt-oss experts: router with bias; stacked MXFP4 experts, gate and up fused, with biases.
void load_fused_experts(const TensorIndex& index, const ModelSpec& s, const MoeSpec& moe, const TensorNames& n,
                        const std::string& p, LayerWeights& l) {
  const int64_t d = s.hidden_size, ff = moe.expert_ffn_dim, count = moe.experts;
  l.router = load_matrix(index, s, p + n.router, count, d);
  l.router_bias = load_vector(index, p + n.router + ".bias", count);
  const std::string gate_up = p + n.stacked_experts + n.expert_gate_up, down = p + n.stacked_experts + n.expert_down;
  if (!index.find(gate_up + "_blocks")) {
    if (const auto* dense = index.find(gate_up)) tensor_error(*dense, "dequantized gpt-oss experts are not supported (keel reads the MXFP4 _blocks/_scales form)");
    index.require(gate_up + "_blocks");
  }
  auto gate_ups = load_mxfp4_matrices(index, gate_up, count, 2 * ff, d);
  auto downs = load_mxfp4_matrices(index, down, count, d, ff);
  auto gate_up_bias = load_stacked_vectors(index, gate_up + "_bias", count, 2 * ff);
  auto down_bias = load_stacked_vectors(index, down + "_bias", count, d);
  l.experts.resize(static_cast<size_t>(count));
  for (size_t e = 0; e < l.experts.size(); ++e) {
    ExpertWeights& x = l.experts[e];
    x.gate_up = std::move(gate_ups[e]);
    x.down = std::move(downs[e]);
    x.gate_up_bias = std::move(gate_up_bias[e]);
    x.down_bias = std::move(down_bias[e]);
  }
}

// gpt-oss in GGUF: gate and up stacked apart, each with its (experts, expert_ffn) bias; the router's
// bias. The two biases are interleaved into gate_up_bias, as the fused layout's rows are.
void load_stacked_expert_biases(const TensorIndex& index, const MoeSpec& moe, int64_t d, const TensorNames& n,
                                const std::string& p, LayerWeights& l) {
  const int64_t ff = moe.expert_ffn_dim, count = moe.experts;
  const std::string stack = p + n.stacked_experts;
  l.router_bias = load_vector(index, p + n.router + ".bias", count);
  auto gate = load_stacked_vectors(index, stack + n.expert_gate + ".bias", count, ff);
  auto up = load_stacked_vectors(index, stack + n.expert_up + ".bias", count, ff);
  auto down = load_stacked_vectors(index, stack + n.expert_down + ".bias", count, d);
  for (size_t e = 0; e < l.experts.size(); ++e) {
    ExpertWeights& x = l.experts[e];
    x.gate_up_bias.resize(static_cast<size_t>(2 * ff));
    for (size_t j = 0; j < static_cast<size_t>(ff); ++j) {
      x.gate_up_bias[2 * j] = gate[e][j];
      x.gate_up_bias[2 * j + 1] = up[e][j];
    }
    x.down_bias = std::move(down[e]);
  }
}

// A mixture-of-experts FFN in either layout: per-expert tensors, or MLX's stacked ones.
void load_experts(const TensorIndex& index, const ModelSpec& s, const MoeSpec& moe, const TensorNames& n,
                  const std::string& p, LayerWeights& l) {
  if (!n.expert_gate_up.empty()) return load_fused_experts(index, s, moe, n, p, l);
  if (moe.beside_dense) return load_experts_beside_dense(index, s, moe, n, p, l);
  const int64_t d = s.hidden_size, ff = moe.expert_ffn_dim;
  l.router = load_matrix(index, s, p + n.router, moe.experts, d);
  l.experts.resize(static_cast<size_t>(moe.experts));
  if (index.find(p + n.stacked_experts + n.expert_gate + ".weight")) {
    auto gate = load_matrices(index, s, p + n.stacked_experts + n.expert_gate, moe.experts, ff, d);
    auto up = load_matrices(index, s, p + n.stacked_experts + n.expert_up, moe.experts, ff, d);
    auto down = load_matrices(index, s, p + n.stacked_experts + n.expert_down, moe.experts, d, ff);
    for (size_t e = 0; e < l.experts.size(); ++e)
      l.experts[e] = gated_expert(std::move(gate[e]), std::move(up[e]), std::move(down[e]));
    if (moe.biases) load_stacked_expert_biases(index, moe, s.hidden_size, n, p, l);
    return;
  }
  for (int64_t e = 0; e < moe.experts; ++e) {
    const std::string x = p + n.experts + std::to_string(e) + ".";
    l.experts[static_cast<size_t>(e)] = gated_expert(load_matrix(index, s, x + n.expert_gate, ff, d),
                                                     load_matrix(index, s, x + n.expert_up, ff, d),
                                                     load_matrix(index, s, x + n.expert_down, d, ff));
  }
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
  if (q.mode != "affine")
    throw Error(where + ": quantization mode '" + q.mode + "' is not supported (affine)");
  if (q.bits != 4 && q.bits != 8)
    throw Error(where + ": quantization bits " + std::to_string(q.bits) + " is not supported (4 or 8)");
  if (q.group_size != 32 && q.group_size != 64 && q.group_size != 128)
    throw Error(where + ": quantization group_size " + std::to_string(q.group_size) + " is not supported (32, 64 or 128)");
}

// The layer's FFN: dense, experts (with a shared expert), or both (Gemma 4).
void load_ffn(const TensorIndex& index, const ModelSpec& s, const LayerSpec& ls, const TensorNames& n,
              const std::string& p, LayerWeights& l) {
  const int64_t d = s.hidden_size;
  if (ls.moe) {
    load_experts(index, s, *ls.moe, n, p, l);
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
  // the same order (load_tensors undoes mlx-lm's other change, its norms).
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
                        int64_t i) {
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
    load_ffn(index, s, ls, n, p, l);
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
  load_ffn(index, s, ls, n, p, l);
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

// Whether a Qwen3-Next checkpoint is mlx-lm's conversion: its linear layers' conv weights are
// (channels, kernel, 1) instead of Hugging Face's (channels, 1, kernel).
bool converted_by_mlx_lm(const ModelWeights& w, const TensorIndex& index, const TensorNames& names) {
  for (int64_t i = 0; i < w.spec.num_layers; ++i) {
    const LayerSpec& ls = w.spec.layers[static_cast<size_t>(i)];
    if (ls.attention != AttentionKind::Linear || w.spec.norm != NormKind::RmsUnitOffset) continue;
    const StoredTensor* conv = index.find(names.layer_prefix + std::to_string(i) + "." + names.linear_attn + "conv1d.weight");
    return conv && ls.linear->conv_kernel > 1 && conv->shape.size() == 3 && conv->shape[2] == 1;
  }
  return false;
}

// The tensors of `index` into `w` (its spec already set), under `given_names` or re-rooted names.
void load_tensors(ModelWeights& w, const TensorIndex& index, const TensorNames& given_names) {
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
    w.layers.push_back(load_layer(index, s, s.layers[static_cast<size_t>(i)], names, i));
  if (converted_by_mlx_lm(w, index, names)) {
    // mlx-lm stores Qwen3-Next's (1 + w) norms with the one added (its sanitize(), detectable by
    // the conv's moved axis): take it out again. Exact: a stored v in [1, 2) gives v - 1 and 1 + (v - 1) == v.
    auto unshift = [](std::vector<float>& v) {
      for (float& x : v) x -= 1.0f;
    };
    unshift(w.final_norm);
    for (LayerWeights& l : w.layers)
      for (std::vector<float>* v : {&l.attn_norm, &l.ffn_norm, &l.q_norm, &l.k_norm}) unshift(*v);
  }
}

}  // namespace

ModelWeights load_weights(const std::filesystem::path& dir, ModelSpec spec, const TensorNames& names) {
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
  load_tensors(w, index, names);
  return w;
}

ModelWeights load_gguf_weights(std::vector<std::unique_ptr<gguf::File>> files, ModelSpec spec,
                               const TensorNames& names) {
  ModelWeights w;
  w.dir = files.front()->path();
  w.spec = std::move(spec);
  w.eos_token_ids = w.spec.eos_token_ids;
  w.gguf_files = std::move(files);
  TensorIndex index(w.dir);
  for (const auto& f : w.gguf_files) index.add(*f);
  load_tensors(w, index, names);
  return w;
}

}  // namespace keel
