#pragma once
// model.safetensors.index.json: which shard holds each tensor, and the declared total size. The one
// reader of the index, for loading (model/weights.cpp) and for planning (plan/weight_inventory.cpp).
// Plain functions and data; safe on any thread.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace keel {

inline constexpr const char* kWeightIndexName = "model.safetensors.index.json";

struct WeightIndex {
  std::filesystem::path path;
  std::map<std::string, std::string> weight_map;  // tensor -> shard file
  std::vector<std::string> shards;                // distinct, sorted
  std::optional<uint64_t> total_size;             // metadata.total_size
};

// Throws keel::Error naming the file when it is unreadable, not JSON, has no weight_map, or names
// a shard outside the folder ("../x", "a/b").
WeightIndex read_weight_index(const std::filesystem::path& path);

}  // namespace keel
