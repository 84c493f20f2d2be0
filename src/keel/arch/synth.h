#pragma once
// Writes a random-weight model folder with the exact tensor names, shapes and storage format of a
// real config.json, so speed can be measured at real sizes without downloading weights. The tensors
// are the ones the family's loader looks for (arch/family.h); gpt-oss's experts are MXFP4 as
// OpenAI ships them. A plain function; any thread.
#include <cstdint>
#include <filesystem>

#include "keel/model/weights.h"

namespace keel {

struct SynthOptions {
  WeightFormat format = WeightFormat::BF16;  // BF16, F16, F32, MLX4 or MLX8
  int mlx_group_size = 64;
  uint64_t seed = 1;
  int64_t layers = 0;  // > 0: keep only the first `layers` decoder layers (a cheaper bench model)
};

// Reads `config_json`, writes `out_dir`/config.json (with a quantization block for MLX formats)
// and `out_dir`/model.safetensors. Returns the bytes written for weights.
uint64_t synthesize_model(const std::filesystem::path& config_json, const std::filesystem::path& out_dir,
                          const SynthOptions& options);

}  // namespace keel
