#include "keel/plan/shard_names.h"

#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "keel/plan/folder_files.h"

namespace keel::plan {

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
