#pragma once
// How a checkpoint's logical tensors (arch/checkpoint_tensors.h) are stored in each weight format
// keel can load, tensor by tensor, as the files would hold them: names, shapes and bytes. What
// `keel plan` uses to size a model from config.json alone, and to check that sizing against the
// safetensors headers when the files are there.
//
//   float (bf16, f16, f32): every tensor at that width.
//   MLX affine b-bit, group g: each matrix whose input size is a multiple of g as U32 words of
//     packed b-bit values plus a scale and a bias per group at the float width; everything else
//     (norms, biases, convolutions, matrices that do not divide) at the float width. Per-module
//     bits from the config's quantization block (an 8-bit router) apply where given.
//   MXFP4: the matrices the loader reads as MXFP4 (gpt-oss experts) as 16 bytes of e2m1 codes
//     plus one e8m0 scale byte per 32 weights; everything else bf16.
//
// GGUF's block formats are not computed from shapes: `keel plan FILE.gguf` counts the file's own
// tensor infos, which say each tensor's type (a Q4_K_M file mixes five).
//
// Plain data and pure functions: safe from any thread.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "keel/arch/checkpoint_tensors.h"
#include "keel/model/model_spec.h"

namespace keel::plan {

struct StorageFormat {
  enum class Kind { Float, MlxAffine, Mxfp4 };
  Kind kind = Kind::Float;
  int float_bytes = 2;  // the unquantized tensors (and MLX scales and biases): 2 = bf16 (or f16), 4 = f32
  bool f16 = false;     // float_bytes 2 as f16 rather than bf16 (same bytes; the name differs)
  int bits = 0;         // MlxAffine
  int group_size = 0;   // MlxAffine

  std::string name() const;  // "bf16", "f32", "mlx4-g64", "mxfp4": what --weights takes
  bool operator==(const StorageFormat&) const = default;
};

// "bf16", "f16", "f32", "mlx4" / "mlx8" (group 64), "mlx4-g32", "mlx8-g128", "mxfp4". Throws
// keel::Error listing the accepted names; "gguf..." is refused with the reason.
StorageFormat parse_storage_format(const std::string& text);

// The formats the plan's table shows, in order: bf16, then MLX 8 and 4 bits at groups 32, 64 and
// 128, then mxfp4 when some tensor of the model is read as MXFP4.
std::vector<StorageFormat> table_formats(const std::vector<arch::CheckpointTensor>& tensors);

// One file tensor.
struct StoredTensor {
  std::string name;
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
  int64_t parameters = 0;  // the logical elements it stores (0 for MLX scales and biases, MXFP4 scales)
  unsigned storage = arch::kStoredFloat;  // how this tensor's matrix is stored (matrices only)
};

// Per-module MLX bits (ModelSpec::quantization_overrides); applied only to MLX formats.
using MlxOverrides = std::map<std::string, MlxQuantization>;

std::vector<StoredTensor> stored_tensors(const std::vector<arch::CheckpointTensor>& tensors, const StorageFormat& format,
                                         const MlxOverrides& overrides = {});

// nullopt when keel's loader reads every matrix in the storage `format` gives it; otherwise the
// first one it does not, with the reason.
std::optional<std::string> unloadable_reason(const std::vector<arch::CheckpointTensor>& tensors,
                                             const StorageFormat& format, const MlxOverrides& overrides = {});

}  // namespace keel::plan
