// Broken model folders are answered with one clear message that names the file and tensor, a
// non-zero exit, and no crash: through the library (keel::Error) and through `keel run`.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "keel/arch/model_loader.h"
#include "keel/arch/synth.h"
#include "keel/model/weights.h"
#include "keel/util/error.h"
#include "test_support.h"

namespace keel {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* kTinyLlama = R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
  "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": false, "eos_token_id": 2})";

class BrokenModel : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(tmp_.path() / "source.json") << kTinyLlama;
    synthesize_model(tmp_.path() / "source.json", dir(), SynthOptions{});
  }
  fs::path dir() const { return tmp_.path() / "model"; }
  fs::path weights() const { return dir() / "model.safetensors"; }

  void edit_config(const std::function<void(json&)>& edit) {
    json c = json::parse(test::read_text(dir() / "config.json"));
    edit(c);
    std::ofstream(dir() / "config.json") << c.dump();
  }

  // Rewrites the safetensors header (data section unchanged).
  void edit_header(const std::function<void(json&)>& edit) {
    std::string bytes = test::read_text(weights());
    uint64_t len = 0;
    for (int i = 7; i >= 0; --i) len = (len << 8) | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
    json h = json::parse(bytes.substr(8, len));
    edit(h);
    test::write_safetensors(weights(), h.dump(), std::string_view(bytes).substr(8 + len));
  }

  void truncate_weights(uint64_t size) { fs::resize_file(weights(), size); }

  // The library error and the CLI's answer must both name what is wrong.
  void expect_failure(const std::vector<std::string>& fragments) {
    try {
      arch::load_model(dir());
      ADD_FAILURE() << "load_model accepted a broken folder";
    } catch (const Error& e) {
      for (const auto& f : fragments) EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
    }
    auto r = test::run_command(test::keel_binary().string() + " run --model " + dir().string() + " --tokens 1,2,3 --max-tokens 2");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("error: "), std::string::npos) << r.output;
    for (const auto& f : fragments) EXPECT_NE(r.output.find(f), std::string::npos) << r.output;
  }

  test::TempDir tmp_;
};

TEST_F(BrokenModel, IntactFolderLoads) { EXPECT_EQ(arch::load_model(dir()).layers.size(), 2u); }

TEST_F(BrokenModel, MissingConfig) {
  fs::remove(dir() / "config.json");
  expect_failure({"no config.json in this folder"});
}

TEST_F(BrokenModel, MissingWeights) {
  fs::remove(weights());
  expect_failure({"no weights found", "model.safetensors"});
}

TEST_F(BrokenModel, TruncatedHeader) {
  truncate_weights(20);
  expect_failure({"model.safetensors", "truncated safetensors header"});
}

TEST_F(BrokenModel, TruncatedData) {
  truncate_weights(fs::file_size(weights()) - 100);
  expect_failure({"model.safetensors", "lm_head.weight", "truncated"});
}

TEST_F(BrokenModel, WrongShape) {
  edit_config([](json& c) { c["intermediate_size"] = 96; });
  expect_failure({"model.safetensors", "model.layers.0.mlp.gate_proj.weight", "shape [128, 64], expected [96, 64]"});
}

TEST_F(BrokenModel, MissingTensor) {
  edit_header([](json& h) { h.erase("model.layers.1.self_attn.v_proj.weight"); });
  expect_failure({"model.layers.1.self_attn.v_proj.weight", "missing"});
}

TEST_F(BrokenModel, UnknownArchitecture) {
  edit_config([](json& c) { c["model_type"] = "gpt2"; });
  expect_failure({"config.json", "model_type 'gpt2' is not supported"});
}

TEST_F(BrokenModel, UnsupportedDtype) {
  edit_header([](json& h) { h["model.layers.0.self_attn.q_proj.weight"]["dtype"] = "I16"; });
  expect_failure({"model.safetensors", "model.layers.0.self_attn.q_proj.weight", "type I16 is not supported"});
}

TEST_F(BrokenModel, MissingConfigKey) {
  edit_config([](json& c) { c.erase("num_hidden_layers"); });
  expect_failure({"config.json", "missing key 'num_hidden_layers'"});
}

TEST_F(BrokenModel, UnsupportedRopeScaling) {
  edit_config([](json& c) { c["rope_scaling"] = {{"rope_type", "longrope"}, {"factor", 4.0}}; });
  expect_failure({"config.json", "rope_scaling type 'longrope' is not supported"});
}

TEST_F(BrokenModel, MlxWithoutQuantizationBlock) {
  fs::remove_all(dir());
  SynthOptions o;
  o.format = WeightFormat::MLX4;
  synthesize_model(tmp_.path() / "source.json", dir(), o);
  edit_config([](json& c) { c.erase("quantization"); });
  expect_failure({"model.safetensors", "no quantization block"});
}

TEST_F(BrokenModel, ShardMissingFromIndex) {
  std::ofstream(dir() / "model.safetensors.index.json")
      << R"({"metadata": {}, "weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors"}})";
  expect_failure({"model-00001-of-00002.safetensors", "cannot open"});
}

}  // namespace
}  // namespace keel
