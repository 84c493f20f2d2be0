#include "keel/model/tensor_binding.h"

#include <cstring>
#include <optional>

#include "keel/util/error.h"
#include "keel/util/half.h"

namespace keel {
namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
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

}  // namespace

Matrix BoundTensors::matrix(const std::string& module, int64_t rows, int64_t cols) {
  return std::move(load_matrices(index_, spec_, module, 0, rows, cols).front());
}

std::vector<Matrix> BoundTensors::stacked(const std::string& module, int64_t stack, int64_t rows, int64_t cols) {
  return load_matrices(index_, spec_, module, stack, rows, cols);
}

std::vector<Matrix> BoundTensors::stacked_dense(const std::string& name, int64_t stack, int64_t rows, int64_t cols) {
  return load_stacked_dense(index_, name, stack, rows, cols);
}

std::vector<Matrix> BoundTensors::stacked_mxfp4(const std::string& module, int64_t stack, int64_t rows, int64_t cols) {
  if (!index_.find(module + "_blocks"))
    if (const auto* dense = index_.find(module))
      tensor_error(*dense, "dequantized MXFP4 experts are not supported (keel reads the _blocks/_scales form)");
  return load_mxfp4_matrices(index_, module, stack, rows, cols);
}

std::vector<float> BoundTensors::floats(const std::string& name, const std::vector<int64_t>& shape,
                                        const std::vector<int64_t>& also) {
  const auto& e = index_.require(name);
  if (also.empty() || e.shape != also) expect_shape(e, shape);
  return to_floats(e);
}

void BoundTensors::absent(const std::string& name, const std::string& why) {
  if (const auto* e = index_.find(name)) tensor_error(*e, "is present but " + why);
}

bool BoundTensors::has_matrix(const std::string& module) { return index_.find(module + ".weight") != nullptr; }

bool BoundTensors::experts_stacked(const std::string& module) { return has_matrix(module); }

}  // namespace keel
