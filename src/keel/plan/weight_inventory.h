#pragma once
// What a model folder really holds, and how many bytes of weights keel will map. Weight bytes come
// from the safetensors headers of the files keel would load, or from the index's declared
// metadata.total_size when the shards are not there; never from a parameter count and never by
// adding up every file in the folder (folders often hold a second copy of the weights).
// Plain functions that read the folder's index and headers and keep no state; the inventory is a
// plain value the caller owns: any thread.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "keel/model/config_view.h"
#include "keel/model/gguf_file.h"
#include "keel/plan/weight_format.h"

namespace keel::plan {

struct WeightInventory {
  std::optional<uint64_t> bytes;  // nullopt: unknown
  std::string bytes_source;       // where `bytes` came from, or why it is unknown
  std::string format;             // how the weights are stored, from config.json
  std::optional<MlxQuantBlock> mlx;
  std::vector<std::pair<std::string, uint64_t>> bytes_by_dtype;  // from headers, largest first
  std::vector<std::filesystem::path> counted_files;
  // Each counted tensor's name and bytes, when `bytes` came from the headers (empty when it came
  // from total_size); the names alone from the index or header either way. The active-bytes split
  // (active_weights.h) reads them.
  std::vector<std::pair<std::string, uint64_t>> tensors;
  std::vector<std::string> tensor_names;
  std::vector<std::string> notes;
  std::vector<std::string> warnings;  // two copies, shards that disagree with the index...
};

// `dir` is the model folder. Throws keel::Error on an unreadable index or safetensors header,
// naming the file.
WeightInventory inventory_weights(const std::filesystem::path& dir, const ConfigView& config);

// A GGUF model's mapped shards (ModelFiles::gguf): the bytes of every tensor info, by ggml type.
WeightInventory inventory_gguf_weights(const std::vector<std::shared_ptr<const gguf::File>>& shards);

}  // namespace keel::plan
