#pragma once
// Binds each stored tensor the walk asks for (model/tensor_walk.h), in its format, to what the
// kernels read: a Matrix used in place in the mapped file (copied only when misaligned), or a
// small float vector widened at load. Every check of a tensor's shape and type is here, and every
// error names the file and the tensor.
//
// Used while loading, on the loading thread. The matrices point into the index's files, which
// must outlive them.
#include <cstdint>
#include <string>
#include <vector>

#include "keel/model/model_spec.h"
#include "keel/model/tensor_index.h"
#include "keel/model/tensor_walk.h"

namespace keel {

class BoundTensors final : public TensorVisitor {
 public:
  // `spec` says which modules are MLX-quantized (config.json's quantization and its overrides).
  BoundTensors(const TensorIndex& index, const ModelSpec& spec) : index_(index), spec_(spec) {}

  Matrix matrix(const std::string& module, int64_t rows, int64_t cols) override;
  std::vector<Matrix> stacked(const std::string& module, int64_t stack, int64_t rows, int64_t cols) override;
  std::vector<Matrix> stacked_dense(const std::string& name, int64_t stack, int64_t rows, int64_t cols) override;
  std::vector<Matrix> stacked_mxfp4(const std::string& module, int64_t stack, int64_t rows, int64_t cols) override;
  std::vector<float> floats(const std::string& name, const std::vector<int64_t>& shape,
                            const std::vector<int64_t>& also = {}) override;
  void absent(const std::string& name, const std::string& why) override;
  bool has_matrix(const std::string& module) override;
  bool experts_stacked(const std::string& module) override;

 private:
  const TensorIndex& index_;
  const ModelSpec& spec_;
};

}  // namespace keel
