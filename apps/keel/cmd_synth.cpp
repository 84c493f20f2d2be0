// keel synth: a random-weight model folder (or GGUF file) with a real config's exact shapes, for
// benchmarks. An --out ending in .gguf writes one GGUF file, with the tokenizer and chat template
// of --tokenizer (default: the config's folder) so llama.cpp can load and quantize it.
#include <climits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "args.h"
#include "commands.h"
#include "keel/arch/synth.h"
#include "keel/chat/template_files.h"
#include "keel/text/gguf_tokenizer.h"
#include "keel/util/error.h"

namespace keel::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot read");
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error(path.string() + ": not valid JSON");
  return j;
}

// A tokenizer_config.json special token ("<|im_end|>" or {"content": ...}); "" when absent.
std::string config_token(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return "";
}

// The tokenizer.* keys for the tokenizer folder `dir`: tokenizer.json's vocabulary as
// text::gguf_tokenizer_metadata gives it, padded to the embedding's rows with unused "[PADn]"
// tokens (llama.cpp wants a token for every row), the bos/eos/padding ids (tokenizer_config.json,
// else config.json's), add_bos_token and the chat template.
void add_tokenizer(gguf::Writer& w, const fs::path& dir, const json& model_config, int64_t vocab_size) {
  const fs::path file = dir / "tokenizer.json";
  text::GgufTokenizerMetadata md = text::gguf_tokenizer_metadata(read_json(file), file.string());
  if (static_cast<int64_t>(md.tokens.size()) > vocab_size)
    throw Error(file.string() + ": " + std::to_string(md.tokens.size()) + " tokens, more than the config's vocab_size " +
                std::to_string(vocab_size));
  for (int64_t i = static_cast<int64_t>(md.tokens.size()); i < vocab_size; ++i) {
    md.tokens.push_back("[PAD" + std::to_string(i) + "]");
    md.token_types.push_back(5);  // unused
  }
  const json config = fs::is_regular_file(dir / "tokenizer_config.json") ? read_json(dir / "tokenizer_config.json") : json::object();
  auto id_of = [&](const std::string& text) -> std::optional<int64_t> {
    if (text.empty()) return std::nullopt;
    for (size_t i = 0; i < md.tokens.size(); ++i)
      if (md.tokens[i] == text) return static_cast<int64_t>(i);
    throw Error((dir / "tokenizer_config.json").string() + ": special token '" + text + "' is not in tokenizer.json");
  };
  auto config_id = [&](const char* key) -> std::optional<int64_t> {
    auto it = model_config.find(key);
    if (it == model_config.end() || it->is_null()) return std::nullopt;
    if (it->is_array()) return it->empty() ? std::nullopt : std::optional<int64_t>((*it)[0].get<int64_t>());
    return it->get<int64_t>();
  };
  std::optional<int64_t> bos = id_of(config_token(config, "bos_token"));
  if (!bos) bos = config_id("bos_token_id");
  std::optional<int64_t> eos = id_of(config_token(config, "eos_token"));
  if (!eos) eos = config_id("eos_token_id");
  const std::optional<int64_t> pad = id_of(config_token(config, "pad_token"));

  w.set_string("tokenizer.ggml.model", md.model);
  w.set_string("tokenizer.ggml.pre", md.pre);
  w.set_strings("tokenizer.ggml.tokens", std::move(md.tokens));
  w.set_int32s("tokenizer.ggml.token_type", md.token_types);
  w.set_strings("tokenizer.ggml.merges", std::move(md.merges));
  if (bos) w.set_uint32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(*bos));
  if (eos) w.set_uint32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(*eos));
  if (pad) w.set_uint32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(*pad));
  w.set_bool("tokenizer.ggml.add_bos_token", config.value("add_bos_token", false));
  if (auto t = chat::find_chat_template(dir, /*want_tools=*/false)) w.set_string("tokenizer.chat_template", t->text);
}

}  // namespace

int synth_command(const CommandArgs& argv) {
  Args args(argv, {"config", "dtype", "out", "seed", "group-size", "layers", "tokenizer"});
  std::filesystem::path config = args.require("config");
  if (std::filesystem::is_directory(config)) config /= "config.json";
  const std::string dtype = args.get_or("dtype", "bf16");
  SynthOptions o;
  if (dtype == "bf16") o.format = WeightFormat::BF16;
  else if (dtype == "f16") o.format = WeightFormat::F16;
  else if (dtype == "f32") o.format = WeightFormat::F32;
  else if (dtype == "mlx4") o.format = WeightFormat::MLX4;
  else if (dtype == "mlx8") o.format = WeightFormat::MLX8;
  else throw Error("--dtype must be bf16, f16, f32, mlx4 or mlx8, got '" + dtype + "'");
  o.mlx_group_size = static_cast<int>(args.get_int("group-size", 64, 32, 128));
  if (o.mlx_group_size != 32 && o.mlx_group_size != 64 && o.mlx_group_size != 128)
    throw Error("--group-size must be 32, 64 or 128");
  o.seed = static_cast<uint64_t>(args.get_int("seed", 1, 0, LONG_MAX));
  o.layers = args.get_int("layers", 0, 0, 100000);  // 0: all of the config's layers
  const std::filesystem::path out = args.require("out");
  uint64_t bytes = 0;
  if (out.extension() == ".gguf") {
    if (o.format == WeightFormat::MLX4 || o.format == WeightFormat::MLX8)
      throw Error("--out " + out.string() + ": a GGUF is written in bf16, f16 or f32 (quantize it with llama-quantize)");
    const fs::path tokenizer = args.get_or("tokenizer", config.parent_path().string());
    if (!fs::is_regular_file(fs::path(tokenizer) / "tokenizer.json"))
      throw Error("--out " + out.string() + ": a GGUF needs a tokenizer (llama.cpp loads no model without one): no tokenizer.json in " +
                  (tokenizer.empty() ? std::string(".") : tokenizer.string()) + "; pass --tokenizer DIR");
    const json model_config = read_json(config);
    bytes = synthesize_gguf(config, out, o, [&](gguf::Writer& w, int64_t vocab_size) {
      add_tokenizer(w, tokenizer, model_config, vocab_size);
    });
  } else {
    if (args.has("tokenizer")) throw Error("--tokenizer goes with an --out ending in .gguf (a folder gets no tokenizer)");
    bytes = synthesize_model(config, out, o);
  }
  std::fprintf(stderr, "keel: wrote %s (%s, %.1f MB of weights)\n", out.string().c_str(), dtype.c_str(),
               static_cast<double>(bytes) / 1e6);
  return 0;
}

}  // namespace keel::cli
