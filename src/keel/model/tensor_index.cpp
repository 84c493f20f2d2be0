#include "keel/model/tensor_index.h"

#include "keel/util/error.h"

namespace keel {
namespace {

// ggml's plain element types as safetensors dtypes.
std::optional<DType> plain_dtype(std::string_view ggml_name) {
  if (ggml_name == "F32") return DType::F32;
  if (ggml_name == "F16") return DType::F16;
  if (ggml_name == "BF16") return DType::BF16;
  if (ggml_name == "F64") return DType::F64;
  if (ggml_name == "I8") return DType::I8;
  if (ggml_name == "I16") return DType::I16;
  if (ggml_name == "I32") return DType::I32;
  if (ggml_name == "I64") return DType::I64;
  return std::nullopt;
}

std::optional<WeightFormat> block_format(std::string_view ggml_name) {
  if (ggml_name == "Q8_0") return WeightFormat::Q8_0;
  if (ggml_name == "Q4_0") return WeightFormat::Q4_0;
  if (ggml_name == "Q5_0") return WeightFormat::Q5_0;
  if (ggml_name == "Q4_K") return WeightFormat::Q4_K;
  if (ggml_name == "Q5_K") return WeightFormat::Q5_K;
  if (ggml_name == "Q6_K") return WeightFormat::Q6_K;
  if (ggml_name == "MXFP4") return WeightFormat::MXFP4_GGUF;
  return std::nullopt;
}

}  // namespace

uint64_t StoredTensor::element_count() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

void TensorIndex::insert(StoredTensor t) {
  auto [it, inserted] = by_name_.emplace(t.name, t);
  if (!inserted)
    throw Error(t.file->string() + ": tensor '" + t.name + "' also appears in " + it->second.file->string());
}

void TensorIndex::add(const SafetensorsFile& file) {
  for (const TensorInfo& info : file.header().tensors) {
    StoredTensor t;
    t.file = &file.path();
    t.name = info.name;
    t.shape = info.shape;
    t.dtype = info.dtype;
    t.type_name = dtype_name(info.dtype);
    t.bytes = file.data(info);
    insert(std::move(t));
  }
}

void TensorIndex::add(const gguf::File& file) {
  for (const gguf::Tensor& info : file.header().tensors) {
    StoredTensor t;
    t.file = &file.path();
    t.name = info.name;
    t.shape = info.shape();
    t.type_name = info.type->name;
    t.dtype = plain_dtype(info.type->name);
    t.blocks = block_format(info.type->name);
    t.bytes = file.data(info);
    insert(std::move(t));
  }
}

const StoredTensor* TensorIndex::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &it->second;
}

const StoredTensor& TensorIndex::require(const std::string& name) const {
  if (const StoredTensor* t = find(name)) return *t;
  throw Error(where_.string() + ": tensor '" + name + "' is missing from the weights");
}

}  // namespace keel
