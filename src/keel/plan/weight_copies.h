#pragma once
// Checks on what else a model folder holds: a second copy of the weights next to the one keel
// loads, and MLX quantization that the tensor names do not bear out.
// Plain functions that read the folder and keep no state (check_mlx_companions writes only the
// caller's `inv`): any thread.
#include <filesystem>
#include <string>
#include <vector>

#include "keel/plan/weight_inventory.h"

namespace keel::plan {

// `names` are the folder's files, `counted` the ones keel loads. One warning per other copy
// (Mistral's consolidated.safetensors, a single-file model.safetensors next to shards, PyTorch
// .bin, GGUF, original/), each with its size on disk.
std::vector<std::string> find_second_copies(const std::filesystem::path& dir, const std::vector<std::string>& names,
                                            const std::vector<std::string>& counted);

// MLX folders name each quantized tensor's companions `.scales` and `.biases`; a config that
// declares quantization without them (or the reverse) does not describe the files. Adds a note or
// a warning to `inv`.
void check_mlx_companions(const std::vector<std::string>& tensor_names, WeightInventory& inv);

}  // namespace keel::plan
