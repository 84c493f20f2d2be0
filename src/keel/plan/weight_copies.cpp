#include "keel/plan/weight_copies.h"

#include <algorithm>
#include <set>

#include "keel/plan/folder_files.h"
#include "keel/plan/number_format.h"

namespace keel::plan {
namespace fs = std::filesystem;

std::vector<std::string> find_second_copies(const fs::path& dir, const std::vector<std::string>& names,
                                            const std::vector<std::string>& counted) {
  std::vector<std::string> warnings;
  if (counted.empty()) return warnings;
  const std::set<std::string> counted_set(counted.begin(), counted.end());
  std::vector<std::string> consolidated, single_file, torch_bin, gguf, other_safetensors, pth;
  for (const auto& n : names) {
    if (counted_set.count(n)) continue;
    if (n == "model.safetensors") {
      single_file.push_back(n);
    } else if (starts_with(n, "consolidated") && ends_with(n, ".safetensors")) {
      consolidated.push_back(n);
    } else if (ends_with(n, ".safetensors")) {
      other_safetensors.push_back(n);
    } else if (starts_with(n, "pytorch_model") && ends_with(n, ".bin")) {
      torch_bin.push_back(n);
    } else if (ends_with(n, ".gguf")) {
      gguf.push_back(n);
    } else if (ends_with(n, ".pth") || ends_with(n, ".pt")) {
      pth.push_back(n);
    }
  }
  const std::string counted_desc = join_names(counted, 2);
  auto warn = [&](const std::vector<std::string>& files, const std::string& what) {
    if (files.empty()) return;
    warnings.push_back("the folder holds two copies of the weights: " + counted_desc + " and " + what + " (" +
                           join_names(files, 2) + ", " + format_size(disk_bytes(dir, files)) +
                           " on disk); keel loads the first and the plan counts it once");
  };
  warn(single_file, "a single-file model.safetensors");
  warn(consolidated, "Mistral's consolidated format");
  warn(torch_bin, "PyTorch .bin files");
  warn(pth, "PyTorch checkpoints");
  warn(gguf, "GGUF files");
  if (!other_safetensors.empty()) {
    warnings.push_back("safetensors files that the weights keel loads do not include: " +
                           join_names(other_safetensors) + " (" + format_size(disk_bytes(dir, other_safetensors)) +
                           " on disk: a second copy or a stale download?)");
  }
  std::error_code ec;
  if (fs::is_directory(dir / "original", ec)) {
    std::vector<std::string> originals;
    for (const auto& e : fs::directory_iterator(dir / "original", ec)) {
      std::string n = e.path().filename().string();
      if (ends_with(n, ".pth") || ends_with(n, ".safetensors") || ends_with(n, ".bin")) originals.push_back(n);
    }
    std::sort(originals.begin(), originals.end());
    if (!originals.empty()) {
      uint64_t bytes = 0;
      for (const auto& n : originals) bytes += fs::file_size(dir / "original" / n, ec);
      warnings.push_back("the folder holds two copies of the weights: " + counted_desc +
                             " and original/ (" + join_names(originals, 2) + ", " + format_size(bytes) +
                             " on disk); keel loads the first and the plan counts it once");
    }
  }
  return warnings;
}

void check_mlx_companions(const std::vector<std::string>& tensor_names, WeightInventory& inv) {
  size_t scales = 0, total = 0;
  auto count = [&](const std::string& name) {
    ++total;
    if (ends_with(name, ".scales")) ++scales;
  };
  for (const auto& n : tensor_names) count(n);
  if (total == 0) return;
  if (inv.mlx && scales == 0) {
    inv.warnings.push_back("config.json declares MLX quantization but no tensor has a .scales companion");
  } else if (inv.mlx) {
    inv.notes.push_back(std::to_string(scales) + " quantized tensors (each with .scales and .biases)");
  } else if (scales > 0) {
    inv.warnings.push_back(std::to_string(scales) +
                           " tensors have .scales companions but config.json has no quantization block");
  }
}

}  // namespace keel::plan
