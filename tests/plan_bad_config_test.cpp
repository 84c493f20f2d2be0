// Bad or partial configs are answered with a message that names the file and the missing key.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "keel/plan/planner.h"
#include "keel/util/error.h"
#include "test_support.h"

namespace plan = keel::plan;
namespace fs = std::filesystem;

namespace {

nlohmann::json read_fixture(const std::string& name) {
  return nlohmann::json::parse(keel::test::read_text(keel::test::shared_dir() / "fixtures/configs" / name / "config.json"));
}

// Plans a folder holding only `config`, returning the error message ("" if it planned).
std::string plan_error(const std::string& config_text) {
  keel::test::TempDir dir;
  std::ofstream(dir.path() / "config.json") << config_text;
  try {
    plan::PlanRequest r;
    r.memory_gib = 64;
    plan::plan_model(keel::arch::resolve_model(dir.path()), r);
  } catch (const keel::Error& e) {
    return e.what();
  }
  return "";
}

std::string without(nlohmann::json config, const std::string& key) {
  config.erase(key);
  if (config.contains("text_config")) config["text_config"].erase(key);
  return config.dump();
}

}  // namespace

TEST(PlanBadConfig, MissingLayerCountIsNamed) {
  std::string msg = plan_error(without(read_fixture("Qwen3-8B"), "num_hidden_layers"));
  EXPECT_NE(msg.find("config.json: missing key 'num_hidden_layers'"), std::string::npos) << msg;
}

TEST(PlanBadConfig, MissingHeadsIsNamed) {
  std::string msg = plan_error(without(read_fixture("Llama-3.3-70B-Instruct"), "num_attention_heads"));
  EXPECT_NE(msg.find("missing key 'num_attention_heads'"), std::string::npos) << msg;
}

TEST(PlanBadConfig, MissingHeadDimSourceIsNamed) {
  auto config = read_fixture("Llama-3.3-70B-Instruct");
  config.erase("hidden_size");
  std::string msg = plan_error(config.dump());
  EXPECT_NE(msg.find("missing key 'hidden_size'"), std::string::npos) << msg;
}

TEST(PlanBadConfig, HybridWithoutLinearAttentionKeysIsNamed) {
  std::string msg = plan_error(without(read_fixture("Qwen3-Next-80B-A3B-Thinking"), "linear_key_head_dim"));
  EXPECT_NE(msg.find("missing key 'linear_key_head_dim'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("linear-attention state"), std::string::npos) << msg;
}

TEST(PlanBadConfig, MlaWithoutRopeDimIsNamed) {
  std::string msg = plan_error(without(read_fixture("DeepSeek-V3"), "qk_rope_head_dim"));
  EXPECT_NE(msg.find("missing key 'qk_rope_head_dim'"), std::string::npos) << msg;
}

TEST(PlanBadConfig, SlidingLayersWithoutWindowAreNamed) {
  std::string msg = plan_error(without(read_fixture("gpt-oss-20b"), "sliding_window"));
  EXPECT_NE(msg.find("missing key 'sliding_window'"), std::string::npos) << msg;
}

TEST(PlanBadConfig, NestedTextConfigKeySaysWhereItLooked) {
  std::string msg = plan_error(without(read_fixture("medgemma-27b-it-gemma3"), "num_key_value_heads"));
  // num_key_value_heads falls back to num_attention_heads (the Hugging Face default), so this
  // plans; removing the layer count does not.
  EXPECT_EQ(msg, "");
  msg = plan_error(without(read_fixture("medgemma-27b-it-gemma3"), "num_hidden_layers"));
  EXPECT_NE(msg.find("missing key 'num_hidden_layers' (in text_config or at the top level"), std::string::npos) << msg;
}

TEST(PlanBadConfig, UnknownLayerKindIsNamed) {
  auto config = read_fixture("gpt-oss-20b");
  config["layer_types"][3] = "mamba";
  std::string msg = plan_error(config.dump());
  EXPECT_NE(msg.find("key 'layer_types' entry 3 is 'mamba'"), std::string::npos) << msg;
}

TEST(PlanBadConfig, LayerTypesOfTheWrongLength) {
  auto config = read_fixture("gpt-oss-20b");
  config["num_hidden_layers"] = 30;
  std::string msg = plan_error(config.dump());
  EXPECT_NE(msg.find("has 24 entries but num_hidden_layers is 30"), std::string::npos) << msg;
}

TEST(PlanBadConfig, WrongTypesAreNamed) {
  auto config = read_fixture("Qwen3-8B");
  config["num_key_value_heads"] = "eight";
  std::string msg = plan_error(config.dump());
  EXPECT_NE(msg.find("key 'num_key_value_heads' must be an integer"), std::string::npos) << msg;
}

TEST(PlanBadConfig, NotJsonNamesTheFile) {
  std::string msg = plan_error("{\"num_hidden_layers\": ");
  EXPECT_NE(msg.find("config.json: not valid JSON"), std::string::npos) << msg;
}

TEST(PlanBadConfig, NoMaximumContextAsksForOne) {
  std::string msg = plan_error(without(read_fixture("Qwen3-8B"), "max_position_embeddings"));
  EXPECT_NE(msg.find("missing key 'max_position_embeddings'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--context"), std::string::npos) << msg;
}

TEST(PlanBadConfig, FolderWithoutConfig) {
  keel::test::TempDir dir;
  plan::PlanRequest r;
  r.memory_gib = 8;
  try {
    plan::plan_model(keel::arch::resolve_model(dir.path()), r);
    FAIL();
  } catch (const keel::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no config.json in this folder"), std::string::npos);
  }
}

TEST(PlanBadConfig, BrokenIndexIsNamed) {
  keel::test::TempDir dir;
  std::ofstream(dir.path() / "config.json") << read_fixture("Qwen3-8B").dump();
  std::ofstream(dir.path() / "model.safetensors.index.json") << R"({"metadata": {"total_size": 10}})";
  plan::PlanRequest r;
  r.memory_gib = 8;
  try {
    plan::plan_model(keel::arch::resolve_model(dir.path()), r);
    FAIL();
  } catch (const keel::Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.safetensors.index.json: missing key 'weight_map'"), std::string::npos)
        << e.what();
  }
}
