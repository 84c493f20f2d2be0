#pragma once
// Every tensor a family's checkpoint holds, with its shape: the loader's own walk
// (model/tensor_walk.h) run with a visitor that lists instead of binding, so `keel plan` can size a
// model from config.json alone, `keel synth` writes what the loader reads, and both agree with it. The list is logical:
// matrices as [rows, cols] (or [stack, rows, cols]) of unquantized elements; how they are stored
// (bf16, MLX affine, MXFP4) is the planner's business (plan/weight_storage.h).
//
// Plain data and pure functions: safe from any thread.
#include <cstdint>
#include <string>
#include <vector>

#include "keel/model/model_spec.h"
#include "keel/model/weights.h"

namespace keel::arch {

// The storages the loader accepts for a matrix (a bit set).
enum MatrixStorage : unsigned {
  kStoredFloat = 1,      // F32, F16 or BF16 elements
  kStoredMlxAffine = 2,  // MLX U32-packed weight with .scales and .biases
  kStoredMxfp4 = 4,      // OCP MXFP4: NAME_blocks and NAME_scales (gpt-oss experts)
};

struct CheckpointTensor {
  // Matrices: the module path; the tensor is NAME.weight (or NAME itself without weight_suffix,
  // or NAME_blocks/NAME_scales as MXFP4). Anything else: the tensor's full name.
  std::string name;
  std::vector<int64_t> shape;  // logical, in elements
  bool matrix = false;         // a linear or embedding weight: quantizable
  bool weight_suffix = true;   // matrices only: stored under NAME.weight (Gemma 4's experts are not)
  unsigned loads_as = kStoredFloat;  // matrices only: what the loader reads; 0: keel cannot load it

  int64_t elements() const;
};

// The tensors load_weights() reads for `spec` (already refined by its family) under `names`, in
// the order it reads them: the embedding, lm_head unless tie_word_embeddings, the final norm and
// each layer's tensors. `mlx_stacked_experts`: Qwen-style experts stacked under
// names.stacked_experts as mlx-lm writes them, instead of one module per expert.
std::vector<CheckpointTensor> checkpoint_tensors(const ModelSpec& spec, const TensorNames& names,
                                                 bool mlx_stacked_experts = false);

}  // namespace keel::arch
