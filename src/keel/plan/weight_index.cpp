#include "keel/plan/weight_index.h"

#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "keel/plan/folder_files.h"
#include "keel/util/error.h"

namespace keel::plan {
namespace fs = std::filesystem;

WeightIndex read_weight_index(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot read the weight index");
  std::ostringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error(path.string() + ": not valid JSON");
  WeightIndex index;
  index.path = path;
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object()) throw Error(path.string() + ": missing key 'weight_map'");
  std::set<std::string> shards;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it.value().is_string()) throw Error(path.string() + ": weight_map['" + it.key() + "'] must be a file name");
    index.weight_map[it.key()] = it.value().get<std::string>();
    shards.insert(it.value().get<std::string>());
  }
  index.shards.assign(shards.begin(), shards.end());
  if (auto md = j.find("metadata"); md != j.end() && md->is_object()) {
    if (auto ts = md->find("total_size"); ts != md->end()) {
      if (ts->is_number_unsigned() || ts->is_number_integer()) {
        index.total_size = ts->get<uint64_t>();
      } else if (ts->is_number_float() && ts->get<double>() >= 0) {
        index.total_size = static_cast<uint64_t>(ts->get<double>());
      } else if (!ts->is_null()) {
        throw Error(path.string() + ": metadata.total_size must be a number of bytes");
      }
    }
  }
  return index;
}

namespace {

struct ShardName {
  std::string stem;   // "model"
  std::string count;  // "00004", as written
};

bool all_digits(std::string_view s) {
  return !s.empty() && s.size() < 10 && s.find_first_not_of("0123456789") == std::string_view::npos;
}

// Splits "STEM-00001-of-00004.safetensors"; nullopt for any other name.
std::optional<ShardName> parse_shard_name(std::string_view name) {
  constexpr std::string_view kSuffix = ".safetensors", kOf = "-of-";
  if (!name.ends_with(kSuffix)) return std::nullopt;
  name.remove_suffix(kSuffix.size());
  const size_t of = name.rfind(kOf);
  if (of == std::string_view::npos) return std::nullopt;
  const std::string_view count = name.substr(of + kOf.size()), head = name.substr(0, of);
  const size_t dash = head.rfind('-');
  if (dash == std::string_view::npos || !all_digits(count) || !all_digits(head.substr(dash + 1))) return std::nullopt;
  return ShardName{std::string(head.substr(0, dash)), std::string(count)};
}

}  // namespace

// "model-00001-of-00004.safetensors" names its position and the shard count; a download that
// mixes two shardings, or a renamed set, shows up as names that disagree with the index.
std::vector<std::string> check_shard_names(const WeightIndex& index) {
  std::vector<std::string> warnings;
  std::map<long, std::string> declared_counts;  // count -> as written ("00002")
  std::set<std::string> stems;
  for (const auto& s : index.shards) {
    const auto shard = parse_shard_name(s);
    if (!shard) continue;
    declared_counts.emplace(std::stol(shard->count), shard->count);
    stems.insert(shard->stem);
  }
  const std::string name = index.path.filename().string();
  if (declared_counts.size() > 1) {
    warnings.push_back("shard names disagree with each other: " + name + " mixes '-of-N' counts; the folder may hold "
                       "pieces of two downloads");
  } else if (declared_counts.size() == 1 && declared_counts.begin()->first != static_cast<long>(index.shards.size())) {
    warnings.push_back("shard names disagree with the index: they say '-of-" + declared_counts.begin()->second +
                       "' but " + name + " lists " +
                       std::to_string(index.shards.size()) + " shard files (" + join_names(index.shards) + ")");
  }
  if (stems.size() > 1) {
    warnings.push_back(name + " names shards with different prefixes (" +
                       join_names(std::vector<std::string>(stems.begin(), stems.end())) + ")");
  }
  return warnings;
}

}  // namespace keel::plan
