#pragma once
// Binds one stored tensor, in its format, to what the kernels read: a Matrix used in place in the
// mapped file (copied only when misaligned), or a small float vector widened at load. Every check
// of a tensor's shape and type is here, and every error names the file and the tensor.
//
// The generic half of loading: model/weights.cpp walks a layer's tensors with these, and a family
// file in arch/ uses them for the layouts only it has (FamilyLoading in weights.h).
//
// Stateless; called while loading, on the loading thread. The matrices point into the index's
// files, which must outlive them.
#include <cstdint>
#include <string>
#include <vector>

#include "keel/model/model_spec.h"
#include "keel/model/tensor_index.h"
#include "keel/model/weights.h"

namespace keel {

[[noreturn]] void tensor_error(const StoredTensor& e, const std::string& what);
void expect_shape(const StoredTensor& e, const std::vector<int64_t>& shape);
// The elements of an F32, F16 or BF16 tensor as floats.
std::vector<float> to_floats(const StoredTensor& e);
// `name`, which must have shape (size).
std::vector<float> load_vector(const TensorIndex& index, const std::string& name, int64_t size);
// (stack, size): one vector per entry of the stack (per-expert biases).
std::vector<std::vector<float>> load_stacked_vectors(const TensorIndex& index, const std::string& name, int64_t stack,
                                                     int64_t size);

// The (rows, cols) matrix `prefix`.weight in whatever format it is stored: F32/F16/BF16, MLX affine
// (with `prefix`.scales and .biases, under config.json's quantization for that module) or a GGUF
// block format.
Matrix load_matrix(const TensorIndex& index, const ModelSpec& spec, const std::string& prefix, int64_t rows,
                   int64_t cols);
// With `stack` > 0, the `stack` matrices of a (stack, rows, cols) tensor (MLX's stacked experts).
std::vector<Matrix> load_matrices(const TensorIndex& index, const ModelSpec& spec, const std::string& prefix,
                                  int64_t stack, int64_t rows, int64_t cols);
// Stacked float matrices (stack, rows, cols) named `name` exactly (no ".weight").
std::vector<Matrix> load_stacked_dense(const TensorIndex& index, const std::string& name, int64_t stack, int64_t rows,
                                       int64_t cols);
// MXFP4 as OpenAI ships it: `prefix`_blocks U8 (stack, rows, cols / 32, 16) and `prefix`_scales U8
// (stack, rows, cols / 32).
std::vector<Matrix> load_mxfp4_matrices(const TensorIndex& index, const std::string& prefix, int64_t stack,
                                        int64_t rows, int64_t cols);

// The first (`first` true) or second half of a matrix's rows, in place.
Matrix row_half(const Matrix& m, bool first);
ExpertWeights gated_expert(Matrix gate, Matrix up, Matrix down);

}  // namespace keel
