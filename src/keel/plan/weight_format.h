#pragma once
// How config.json says the weights are stored: a dtype, an MLX quantization block, fp8 blocks,
// mxfp4 experts.
// Pure functions of the parsed config (the caller owns `mlx`, which is written): any thread.
#include <cstdint>
#include <optional>
#include <string>

#include "keel/model/config_view.h"

namespace keel::plan {

// MLX affine quantization (config.json "quantization": {"group_size", "bits"}): each group of
// weights carries a bf16 scale and a bf16 bias.
struct MlxQuantBlock {
  int64_t bits = 0;
  int64_t group_size = 0;
  double bits_per_weight() const { return static_cast<double>(bits) + 32.0 / static_cast<double>(group_size); }
};

// "bf16", "MLX affine 4-bit, group 64 (...)", "fp8 e4m3, scales per 128x128 block (...)".
// Sets `mlx` for MLX folders. Throws keel::Error naming a malformed quantization block.
std::string describe_weight_format(const ConfigView& config, std::optional<MlxQuantBlock>& mlx);

}  // namespace keel::plan
