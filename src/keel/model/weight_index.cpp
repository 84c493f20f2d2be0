#include "keel/model/weight_index.h"

#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "keel/util/error.h"

namespace keel {
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
    const std::string file = it.value().get<std::string>();
    if (file.find('/') != std::string::npos || file.find('\\') != std::string::npos || file == ".." || file.empty())
      throw Error(path.string() + ": shard name '" + file + "' must be a plain file name in the folder");
    index.weight_map[it.key()] = file;
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

}  // namespace keel
