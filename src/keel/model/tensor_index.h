#pragma once
// Every tensor of a checkpoint by name, whichever container holds it: safetensors files (Hugging
// Face and MLX folders) or GGUF files. The loader (weights.cpp) asks for tensors by name and reads
// their shape (outermost first, as Hugging Face writes it), element type and bytes from here, so
// one loader serves both. GGUF's ggml dimensions (innermost first) are reversed into that order.
//
// Built once while loading, on one thread; the files it indexes must outlive it.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "keel/model/dtype.h"
#include "keel/model/gguf_file.h"
#include "keel/model/safetensors.h"
#include "keel/model/weights.h"

namespace keel {

struct StoredTensor {
  const std::filesystem::path* file = nullptr;
  std::string name;
  std::vector<int64_t> shape;          // outermost first
  std::optional<DType> dtype;          // plain elements (safetensors dtypes; GGUF F32, F16, BF16, I8...)
  std::optional<WeightFormat> blocks;  // GGUF block formats keel has kernels for
  std::string type_name;               // as the file names its type ("BF16", "Q4_K", "IQ2_XS"), for errors
  std::span<const uint8_t> bytes;

  uint64_t element_count() const;
};

class TensorIndex {
 public:
  // `where` names the checkpoint (its folder or first file) in errors about missing tensors.
  explicit TensorIndex(std::filesystem::path where) : where_(std::move(where)) {}

  void add(const SafetensorsFile& file);
  void add(const gguf::File& file);

  const StoredTensor* find(const std::string& name) const;
  // Throws keel::Error "WHERE: tensor 'NAME' is missing from the weights".
  const StoredTensor& require(const std::string& name) const;
  const std::filesystem::path& where() const { return where_; }

 private:
  void insert(StoredTensor t);
  std::filesystem::path where_;
  std::map<std::string, StoredTensor> by_name_;
};

}  // namespace keel
