#pragma once
// model.safetensors.index.json: which shard holds each tensor, and the declared total size.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace keel::plan {

inline constexpr const char* kWeightIndexName = "model.safetensors.index.json";

struct WeightIndex {
  std::filesystem::path path;
  std::map<std::string, std::string> weight_map;  // tensor -> shard file
  std::vector<std::string> shards;                // distinct, sorted
  std::optional<uint64_t> total_size;             // metadata.total_size
};

// Throws keel::Error naming the file when it is unreadable, not JSON, or has no weight_map.
WeightIndex read_weight_index(const std::filesystem::path& path);

// Warnings when the shard names disagree with the index or with each other.
std::vector<std::string> check_shard_names(const WeightIndex& index);

}  // namespace keel::plan
