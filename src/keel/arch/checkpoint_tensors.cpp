#include "keel/arch/checkpoint_tensors.h"

#include "keel/arch/family.h"
#include "keel/model/tensor_walk.h"

namespace keel::arch {
namespace {

// The walk's visitor that records each tensor asked for, in the walk's order, and binds nothing.
class TensorList final : public TensorVisitor {
 public:
  TensorList(std::vector<CheckpointTensor>& out, bool stacked_experts) : out_(out), stacked_experts_(stacked_experts) {}

  Matrix matrix(const std::string& module, int64_t rows, int64_t cols) override {
    out_.push_back({module, {rows, cols}, true, true, kStoredFloat | kStoredMlxAffine});
    return {};
  }
  std::vector<Matrix> stacked(const std::string& module, int64_t stack, int64_t rows, int64_t cols) override {
    out_.push_back({module, {stack, rows, cols}, true, true, kStoredFloat | kStoredMlxAffine});
    return {};
  }
  std::vector<Matrix> stacked_dense(const std::string& name, int64_t stack, int64_t rows, int64_t cols) override {
    out_.push_back({name, {stack, rows, cols}, true, false, kStoredFloat});
    return {};
  }
  std::vector<Matrix> stacked_mxfp4(const std::string& module, int64_t stack, int64_t rows, int64_t cols) override {
    out_.push_back({module, {stack, rows, cols}, true, true, kStoredMxfp4});
    return {};
  }
  std::vector<float> floats(const std::string& name, const std::vector<int64_t>& shape,
                            const std::vector<int64_t>& /*also*/) override {
    out_.push_back({name, shape, false, false, kStoredFloat});
    return {};
  }
  void absent(const std::string&, const std::string&) override {}
  bool has_matrix(const std::string&) override { return false; }
  bool experts_stacked(const std::string&) override { return stacked_experts_; }

 private:
  std::vector<CheckpointTensor>& out_;
  const bool stacked_experts_;
};

}  // namespace

int64_t CheckpointTensor::elements() const {
  int64_t n = 1;
  for (int64_t dim : shape) n *= dim;
  return n;
}

std::vector<CheckpointTensor> checkpoint_tensors(const ModelSpec& spec, const TensorNames& names,
                                                 bool mlx_stacked_experts) {
  std::vector<CheckpointTensor> out;
  TensorList list(out, mlx_stacked_experts);
  const Family* family = find_family(spec.model_type);
  ModelWeights unbound;  // the walk's matrices and vectors, all empty
  walk_tensors(list, spec, names, family ? family->loading : FamilyLoading{}, unbound);
  return out;
}

}  // namespace keel::arch
