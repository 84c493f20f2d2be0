#pragma once
// Which files a --model path names, found once: a Hugging Face / MLX model folder (its config.json
// and weight files), or a GGUF model (one .gguf file, or every shard of a split one), mapped with
// each header parsed here and nowhere else. arch/model_source.h adds the config and chat template
// read from them; the loader, keel plan and the KV disk tier's identity all read these files.
// Immutable once found; the mapped shards are shared by copies: read it from any thread.
#include <filesystem>
#include <memory>
#include <vector>

#include "keel/model/gguf_file.h"

namespace keel {

struct ModelFiles {
  std::filesystem::path path;         // the model folder, or a GGUF model's first shard (weakly canonical)
  std::filesystem::path config_json;  // a folder's config.json (the one named, or the folder's); empty for GGUF
  std::vector<std::shared_ptr<const gguf::File>> gguf;  // a GGUF model's shards, in order; empty for a folder

  bool is_gguf() const { return !gguf.empty(); }
  // The folder the weight files are in: `path` for a folder model, the shards' folder for GGUF.
  std::filesystem::path folder() const { return is_gguf() ? path.parent_path() : path; }
};

// `model` is a model folder, the config.json in one, a .gguf file (any shard of a split model; any
// file that starts with the GGUF magic, as Ollama's sha256-... blobs do), or a folder that holds
// exactly one GGUF model and no config.json. Throws keel::Error naming the path: nothing there, a
// folder with neither config.json nor a GGUF model, a folder with several GGUF models (naming
// them), a missing shard, or a shard whose split.no/split.count says it is another's.
ModelFiles find_model_files(const std::filesystem::path& model);

}  // namespace keel
