#include "keel/model/model_files.h"

#include <cstring>
#include <fstream>
#include <regex>
#include <set>
#include <string>

#include "keel/util/error.h"

namespace keel {
namespace fs = std::filesystem;
namespace {

// llama.cpp's split naming: PREFIX-00001-of-00003.gguf.
const std::regex& split_name() {
  static const std::regex re(R"((.*)-(\d{5})-of-(\d{5})\.gguf)");
  return re;
}

// `path` itself, or, for a split model given any of its shards, every shard in order.
std::vector<fs::path> shard_paths(const fs::path& path) {
  std::smatch m;
  const std::string name = path.filename().string();
  if (!std::regex_match(name, m, split_name())) return {path};
  const int count = std::stoi(m[3].str());
  if (count < 1) throw Error(path.string() + ": a split model of " + m[3].str() + " files");
  std::vector<fs::path> out;
  for (int i = 1; i <= count; ++i) {
    char part[40];
    std::snprintf(part, sizeof part, "-%05d-of-%05d.gguf", i, count);
    auto shard = path.parent_path() / (m[1].str() + part);
    if (!fs::exists(shard))
      throw Error(shard.string() + ": missing shard " + std::to_string(i) + " of " + std::to_string(count) +
                  " of the split model " + path.string());
    out.push_back(shard);
  }
  return out;
}

// By content, not name: Ollama keeps its GGUFs as sha256-... blobs without an extension.
bool is_gguf_file(const fs::path& path) {
  if (path.extension() == ".gguf") return true;
  std::ifstream f(path, std::ios::binary);
  char magic[4] = {};
  return f.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

// The one GGUF model in a folder without config.json: a lone file, or the first shard of one split
// model; nullopt when it holds none.
std::optional<fs::path> gguf_in_folder(const fs::path& dir) {
  std::set<std::string> models;
  fs::path first;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().extension() != ".gguf") continue;
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (std::regex_match(name, m, split_name()) && m[2].str() != "00001") continue;
    models.insert(name);
    first = e.path();
  }
  if (models.empty()) return std::nullopt;
  if (models.size() > 1) {
    std::string list;
    for (const auto& m : models) list += (list.empty() ? "" : ", ") + m;
    throw Error(dir.string() + ": holds several GGUF models (" + list + "); name the file with --model");
  }
  return first;
}

// Maps every shard; each says which it is, so a renamed or mixed-up file is not read as another's part.
std::vector<std::shared_ptr<const gguf::File>> map_shards(const fs::path& shard) {
  const std::vector<fs::path> paths = shard_paths(shard);
  std::vector<std::shared_ptr<const gguf::File>> files;
  for (const auto& p : paths) files.push_back(std::make_shared<const gguf::File>(p));
  for (size_t i = 0; i < files.size() && files.size() > 1; ++i) {
    const auto count = files[i]->optional_int("split.count");
    const auto no = files[i]->optional_int("split.no");
    if (!count || !no || *count != static_cast<int64_t>(files.size()) || *no != static_cast<int64_t>(i))
      files[i]->fail("split.no", "this file is not shard " + std::to_string(i + 1) + " of " + std::to_string(files.size()) +
                                     " (split.no " + (no ? std::to_string(*no) : "missing") + ", split.count " +
                                     (count ? std::to_string(*count) : "missing") + ")");
  }
  return files;
}

// `shard`: any shard of the model, or its only file.
ModelFiles gguf_model(const fs::path& shard) {
  ModelFiles files;
  files.gguf = map_shards(shard);
  files.path = files.gguf.front()->path();
  return files;
}

}  // namespace

ModelFiles find_model_files(const fs::path& named) {
  std::error_code ec;
  if (!fs::exists(named, ec)) throw Error(named.string() + ": no such model folder or file");
  // Absolute from here on: logs, /health and errors name the files wherever keel was started.
  const fs::path model = fs::weakly_canonical(named);
  if (!fs::is_directory(model, ec)) {
    if (is_gguf_file(model)) return gguf_model(model);
    ModelFiles files;  // a config.json named by itself: its folder holds the weights
    files.config_json = model;
    files.path = model.parent_path();
    return files;
  }
  // A folder with config.json is a Hugging Face / MLX folder, whatever else it holds.
  if (fs::is_regular_file(model / "config.json", ec)) {
    ModelFiles files;
    files.path = model;
    files.config_json = model / "config.json";
    return files;
  }
  if (auto first = gguf_in_folder(model)) return gguf_model(*first);
  throw Error(named.string() +
              ": no config.json in this folder, and no .gguf file (pass a model folder, its config.json, or a GGUF model)");
}

}  // namespace keel
