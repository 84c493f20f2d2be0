#include "keel/plan/weight_inventory.h"

#include <algorithm>
#include <map>
#include <set>

#include "keel/model/gguf_file.h"
#include "keel/model/safetensors.h"
#include "keel/plan/folder_files.h"
#include "keel/plan/number_format.h"
#include "keel/plan/weight_copies.h"
#include "keel/plan/shard_names.h"
#include "keel/util/error.h"

namespace keel::plan {
namespace fs = std::filesystem;
namespace {

void add_dtype_bytes(std::map<std::string, uint64_t>& by_dtype, const SafetensorsHeader& h) {
  for (const auto& t : h.tensors) by_dtype[std::string(dtype_name(t.dtype))] += t.byte_size();
}

void add_tensors(WeightInventory& inv, const SafetensorsHeader& h) {
  for (const auto& t : h.tensors) inv.tensors.emplace_back(t.name, t.byte_size());
}

uint64_t tensor_bytes(const SafetensorsHeader& h) {
  uint64_t total = 0;
  for (const auto& t : h.tensors) total += t.byte_size();
  return total;
}

// Counts the shards the index names, cross-checking names, tensors and the declared total.
void count_indexed(const fs::path& dir, const WeightIndex& index, const std::set<std::string>& present,
                   WeightInventory& inv, std::map<std::string, uint64_t>& by_dtype) {
  const std::string index_name = index.path.filename().string();
  std::vector<std::string> missing;
  for (const auto& s : index.shards) {
    if (!present.count(s)) missing.push_back(s);
  }
  if (!missing.empty()) {
    if (missing.size() < index.shards.size()) {
      inv.warnings.push_back(index_name + " names " + std::to_string(index.shards.size()) + " shards but " +
                             std::to_string(missing.size()) + " are not in the folder: " + join_names(missing));
    }
    if (index.total_size) {
      inv.bytes = index.total_size;
      inv.bytes_source = index_name + " metadata.total_size (" +
                         (missing.size() == index.shards.size() ? std::string("no shard files in the folder")
                                                                : std::string("some shards missing")) +
                         ")";
    } else {
      inv.bytes_source = "the shards are not all in the folder and " + index_name +
                         " declares no metadata.total_size";
    }
    return;
  }

  uint64_t total = 0;
  std::map<std::string, std::set<std::string>> expected;  // shard -> tensors the index puts there
  for (const auto& [tensor, shard] : index.weight_map) expected[shard].insert(tensor);
  std::vector<std::string> misplaced;
  for (const auto& s : index.shards) {
    SafetensorsHeader h = read_safetensors_header(dir / s);
    total += tensor_bytes(h);
    add_dtype_bytes(by_dtype, h);
    add_tensors(inv, h);
    inv.counted_files.push_back(dir / s);
    std::set<std::string> held;
    for (const auto& t : h.tensors) held.insert(t.name);
    for (const auto& t : expected[s]) {
      if (!held.count(t)) misplaced.push_back(t + " (in " + s + ")");
    }
  }
  if (!misplaced.empty()) {
    inv.warnings.push_back(index_name + " places " + std::to_string(misplaced.size()) +
                           " tensors in shards that do not hold them: " + join_names(misplaced));
  }
  inv.bytes = total;
  inv.bytes_source = "safetensors headers of the " + std::to_string(index.shards.size()) + " shards in " + index_name;
  if (index.total_size && *index.total_size != total) {
    inv.warnings.push_back(index_name + " declares total_size " + format_count(static_cast<int64_t>(*index.total_size)) +
                           " but the shard headers hold " + format_count(static_cast<int64_t>(total)) +
                           " bytes of tensors; counting the headers");
  }
}

}  // namespace

WeightInventory inventory_weights(const fs::path& dir, const ConfigView& config) {
  WeightInventory inv;
  inv.format = describe_weight_format(config, inv.mlx);

  const std::vector<std::string> names = list_files(dir);
  const std::set<std::string> present(names.begin(), names.end());
  std::map<std::string, uint64_t> by_dtype;
  std::vector<std::string> counted;
  std::optional<WeightIndex> index;
  std::vector<std::string> tensor_names;

  if (present.count(kWeightIndexName)) {
    index = read_weight_index(dir / kWeightIndexName);
    for (auto& w : check_shard_names(*index)) inv.warnings.push_back(std::move(w));
    for (const auto& [name, shard] : index->weight_map) tensor_names.push_back(name);
    count_indexed(dir, *index, present, inv, by_dtype);
    for (const auto& s : index->shards) {
      if (present.count(s)) counted.push_back(s);
    }
    for (const auto& n : names) {
      if (n != kWeightIndexName && ends_with(n, ".safetensors.index.json")) {
        inv.warnings.push_back("a second weight index, " + n + ", sits next to " + kWeightIndexName +
                               ": the folder likely holds two copies of the weights");
      }
    }
  } else {
    // Without an index keel loads model.safetensors, else Mistral's consolidated.safetensors.
    for (const char* single : {"model.safetensors", "consolidated.safetensors"}) {
      if (!present.count(single)) continue;
      SafetensorsHeader h = read_safetensors_header(dir / single);
      inv.bytes = tensor_bytes(h);
      inv.bytes_source = std::string("safetensors header of ") + single;
      add_dtype_bytes(by_dtype, h);
      add_tensors(inv, h);
      for (const auto& t : h.tensors) tensor_names.push_back(t.name);
      inv.counted_files.push_back(dir / single);
      counted.push_back(single);
      break;
    }
    if (!inv.bytes) {
      std::vector<std::string> loose;
      for (const auto& n : names) {
        if (ends_with(n, ".safetensors")) loose.push_back(n);
      }
      inv.bytes_source = loose.empty() ? "no weight files and no " + std::string(kWeightIndexName) + " in the folder"
                                       : join_names(loose) + " without a " + kWeightIndexName +
                                             " to say which files form the model";
    }
  }

  // Only about the files: a folder with none has no tower bytes to include.
  if (inv.bytes && config.root().contains("vision_config")) {
    inv.notes.push_back("multimodal folder: the weights include the vision tower");
  }
  for (auto& w : find_second_copies(dir, names, counted)) inv.warnings.push_back(std::move(w));
  check_mlx_companions(tensor_names, inv);
  inv.tensor_names = std::move(tensor_names);
  inv.bytes_by_dtype.assign(by_dtype.begin(), by_dtype.end());
  std::sort(inv.bytes_by_dtype.begin(), inv.bytes_by_dtype.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  return inv;
}

WeightInventory inventory_gguf_weights(const std::vector<std::shared_ptr<const gguf::File>>& shards) {
  WeightInventory inv;
  std::map<std::string, uint64_t> by_type;
  uint64_t total = 0;
  for (const auto& shard : shards) {
    for (const gguf::Tensor& t : shard->header().tensors) {
      by_type[std::string(t.type->name)] += t.bytes;
      inv.tensors.emplace_back(t.name, t.bytes);
      inv.tensor_names.push_back(t.name);
      total += t.bytes;
    }
    inv.counted_files.push_back(shard->path());
  }
  inv.bytes = total;
  inv.bytes_source = shards.size() == 1 ? "the GGUF's tensor infos"
                                        : "the tensor infos of " + std::to_string(shards.size()) + " GGUF shards";
  inv.bytes_by_dtype.assign(by_type.begin(), by_type.end());
  std::sort(inv.bytes_by_dtype.begin(), inv.bytes_by_dtype.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  inv.format = "GGUF " + (inv.bytes_by_dtype.empty() ? std::string("(no tensors)") : inv.bytes_by_dtype.front().first +
                                                                                        " and others by tensor");
  if (inv.bytes_by_dtype.size() == 1) inv.format = "GGUF " + inv.bytes_by_dtype.front().first;
  return inv;
}

}  // namespace keel::plan
