#pragma once
// The one walk over a model's tensors: which tensors a spec's layers have, under which names, in
// which shapes and in which order. A visitor decides what each becomes: the loader binds it to the
// mapped files (BoundTensors, model/tensor_binding.h); `keel plan` and `keel synth` list it
// (arch/checkpoint_tensors.h). A family's own layouts (FamilyLoading) are written against the same
// visitor, so what the loader reads and what the planner counts cannot drift apart.
//
// Called while loading or planning, on that one thread.
#include <cstdint>
#include <string>
#include <vector>

#include "keel/model/model_spec.h"
#include "keel/model/weights.h"

namespace keel {

class TensorIndex;

// What the walk asks of a checkpoint. Binding returns the tensors; listing records them and
// returns empty matrices and vectors, which the walk passes through untouched.
class TensorVisitor {
 public:
  virtual ~TensorVisitor() = default;
  // (rows, cols) at `module`.weight, in any stored format: floats, MLX affine, a GGUF block format.
  virtual Matrix matrix(const std::string& module, int64_t rows, int64_t cols) = 0;
  // (stack, rows, cols) at `module`.weight: experts stacked with a leading expert dimension.
  virtual std::vector<Matrix> stacked(const std::string& module, int64_t stack, int64_t rows, int64_t cols) = 0;
  // (stack, rows, cols) float matrices at `name` itself, without ".weight" (Gemma 4's experts).
  virtual std::vector<Matrix> stacked_dense(const std::string& name, int64_t stack, int64_t rows, int64_t cols) = 0;
  // (stack, rows, cols) in MXFP4 as OpenAI ships it: `module`_blocks and `module`_scales (gpt-oss).
  virtual std::vector<Matrix> stacked_mxfp4(const std::string& module, int64_t stack, int64_t rows, int64_t cols) = 0;
  // A float tensor's elements in order (norms, biases, conv taps, scalars), of shape `shape`, or
  // of `also` when given: another shape the same elements are stored in.
  virtual std::vector<float> floats(const std::string& name, const std::vector<int64_t>& shape,
                                    const std::vector<int64_t>& also = {}) = 0;
  // `name`, which the spec rules out for the reason `why`, must not be stored.
  virtual void absent(const std::string& name, const std::string& why) = 0;
  // Whether the optional matrix `module`.weight is stored (an lm_head beside tied embeddings).
  // Listing: no, a list holds what the spec requires.
  virtual bool has_matrix(const std::string& module) = 0;
  // Whether MoE experts are stored stacked under `module` (MLX, GGUF) rather than one by one.
  virtual bool experts_stacked(const std::string& module) = 0;
};

// What a family walks or converts its own way: its family file in arch/ fills this, so that
// model/ stays generic. Either may be left empty.
struct FamilyLoading {
  // An MoE layer's router and experts, for a family whose layout is its own; `layer` is the layer's
  // tensor prefix ("model.layers.3."). Empty: walk_routed_experts.
  void (*experts)(TensorVisitor& t, const ModelSpec& spec, const MoeSpec& moe, const TensorNames& names,
                  const std::string& layer, LayerWeights& out) = nullptr;
  // Runs once every tensor is bound (not when listing), with the names they were found under:
  // conversions of one exporter's layout back to the reference's (mlx-lm's sanitize(), undone).
  void (*sanitize)(const TensorIndex& index, const TensorNames& names, ModelWeights& w) = nullptr;
};

// Every tensor of `spec` under `names`, into `w` (embed, lm_head, final_norm, layers): the
// embedding, lm_head unless tied (or when stored anyway), the final norm, then each layer's.
void walk_tensors(TensorVisitor& t, const ModelSpec& spec, const TensorNames& names, const FamilyLoading& family,
                  ModelWeights& w);

// The usual MoE layout: the router (`names.router`), then each expert's gate, up and down, one
// module per expert (`names.experts` + e) or stacked (`names.stacked_experts`).
void walk_routed_experts(TensorVisitor& t, const ModelSpec& spec, const MoeSpec& moe, const TensorNames& names,
                         const std::string& layer, LayerWeights& out);

// (stack, size) floats as one vector per entry (per-expert biases); `stack` empty ones when listing.
std::vector<std::vector<float>> per_entry(TensorVisitor& t, const std::string& name, int64_t stack, int64_t size);

// The first (`first` true) or second half of a matrix's rows, in place (copied when `m` holds a
// realigned copy of its bytes, which goes when it does).
Matrix row_half(const Matrix& m, bool first);
ExpertWeights gated_expert(Matrix gate, Matrix up, Matrix down);

}  // namespace keel
