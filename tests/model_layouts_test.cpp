// The layouts one model ships in load to the same model, with the same logits: a checkpoint split
// into shards behind model.safetensors.index.json, and a multimodal folder whose language model
// sits under a nested root with its config inside text_config.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "keel/arch/model_loader.h"
#include "keel/arch/transformer.h"
#include "keel/engine/forward_loop.h"
#include "keel/engine/standalone_sequence.h"
#include "keel/model/safetensors.h"
#include "keel/model/weights.h"
#include "keel/util/error.h"
#include "test_support.h"

namespace keel {
namespace {

namespace fs = std::filesystem;

// Writes the tensors of `src` round-robin into `shards` safetensors files plus an index.
void split_into_shards(const fs::path& src_dir, const fs::path& out_dir, int shards) {
  fs::create_directories(out_dir);
  for (const char* f : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"})
    if (fs::exists(src_dir / f)) fs::copy_file(src_dir / f, out_dir / f);
  SafetensorsFile src(src_dir / "model.safetensors");
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  uint64_t total = 0;
  for (int s = 0; s < shards; ++s) {
    const std::string name = "model-0000" + std::to_string(s + 1) + "-of-0000" + std::to_string(shards) + ".safetensors";
    nlohmann::json header = nlohmann::json::object();
    std::string data;
    const auto& tensors = src.header().tensors;
    for (size_t i = static_cast<size_t>(s); i < tensors.size(); i += static_cast<size_t>(shards)) {
      const auto& t = tensors[i];
      auto bytes = src.data(t);
      header[t.name] = {{"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + bytes.size()}}};
      data.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
      index["weight_map"][t.name] = name;
      total += bytes.size();
    }
    test::write_safetensors(out_dir / name, header.dump(), data);
  }
  index["metadata"]["total_size"] = total;
  std::ofstream(out_dir / "model.safetensors.index.json") << index.dump(2);
}

std::vector<float> last_logits(const ModelWeights& w, const std::vector<int32_t>& tokens) {
  ThreadPool pool(2);
  Transformer model(w, pool);
  StandaloneSequence cache(w.spec, static_cast<int64_t>(tokens.size()));
  std::vector<float> logits(static_cast<size_t>(w.spec.vocab_size));
  const std::vector<chat::Role> roles(tokens.size(), chat::Role::user);
  prefill(model, cache.sequence(), tokens, roles, static_cast<int64_t>(tokens.size()), logits);
  return logits;
}

TEST(ModelLayouts, ShardedCheckpointEqualsSingleFile) {
  for (const char* name : {"tiny-toolcaller", "tiny-toolcaller-mlx4"}) {
    test::TempDir tmp;
    const fs::path src = test::shared_dir() / "models" / name;
    split_into_shards(src, tmp.path() / "sharded", 3);
    const ModelWeights single = arch::load_model(src);
    const ModelWeights sharded = arch::load_model(tmp.path() / "sharded");
    EXPECT_EQ(sharded.files.size(), 3u);
    EXPECT_EQ(sharded.eos_token_ids, single.eos_token_ids);
    const std::vector<int32_t> tokens = {1657, 800, 198, 610, 525, 264};
    EXPECT_EQ(last_logits(sharded, tokens), last_logits(single, tokens)) << name;
  }
}

// Copies `src_dir` with every tensor renamed from "model." to `root` (lm_head beside it) and the
// config moved into the text_config of a `architecture` config, as multimodal checkpoints ship.
void nest_as_multimodal(const fs::path& src_dir, const fs::path& out_dir, std::string_view root,
                        const std::string& architecture) {
  fs::create_directories(out_dir);
  nlohmann::json text_config = nlohmann::json::parse(std::ifstream(src_dir / "config.json"));
  nlohmann::json config = {{"architectures", {architecture}}, {"model_type", "gemma3"},
                           {"text_config", text_config}, {"vision_config", {{"hidden_size", 8}}}};
  std::ofstream(out_dir / "config.json") << config.dump(2);
  const TensorNames plain;
  const TensorNames nested = plain.rooted_at(root);
  SafetensorsFile src(src_dir / "model.safetensors");
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const auto& t : src.header().tensors) {
    std::string name = t.name;
    if (name.starts_with("model.")) name = std::string(root) + name.substr(6);
    if (name.starts_with(plain.lm_head)) name = nested.lm_head + name.substr(plain.lm_head.size());
    auto bytes = src.data(t);
    header[name] = {{"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + bytes.size()}}};
    data.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  // A tower keel does not read: present in real folders, ignored by the loader.
  const std::string tower(16, '\0');
  header["vision_tower.vision_model.embeddings.patch_embedding.weight"] = {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {data.size(), data.size() + tower.size()}}};
  data += tower;
  test::write_safetensors(out_dir / "model.safetensors", header.dump(), data);
}

TEST(ModelLayouts, MultimodalFolderNestsTheSameLanguageModel) {
  const fs::path src = test::shared_dir() / "models" / "tiny-gemma3-random";
  const ModelWeights plain = arch::load_model(src);
  const std::vector<int32_t> tokens = {2, 105, 236, 107, 925, 364};
  const std::vector<float> expected = last_logits(plain, tokens);
  for (std::string_view root : kMultimodalRoots) {
    test::TempDir tmp;
    nest_as_multimodal(src, tmp.path(), root, "Gemma3ForConditionalGeneration");
    const ModelWeights nested = arch::load_model(tmp.path());
    EXPECT_EQ(nested.spec.model_type, "gemma3_text") << root;
    EXPECT_EQ(last_logits(nested, tokens), expected) << root;
  }
}

TEST(ModelLayouts, TheMissingTensorIsNamedAsTheFamilyExpectsIt) {
  test::TempDir tmp;
  const fs::path src = test::shared_dir() / "models" / "tiny-gemma3-random";
  nest_as_multimodal(src, tmp.path(), "text_model.", "Gemma3ForConditionalGeneration");
  try {
    arch::load_model(tmp.path());
    FAIL() << "an unknown root loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.embed_tokens.weight"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace keel
