// `keel plan` end to end: the table, --json, and errors that name what is wrong.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace {

keel::test::CommandResult keel_plan(const std::string& args) {
  return keel::test::run_command(keel::test::keel_binary().string() + " plan " + args);
}

std::string config(const std::string& name) { return (keel::test::shared_dir() / "fixtures/configs" / name).string(); }

}  // namespace

TEST(PlanCli, TableForLlama70B) {
  auto r = keel_plan(config("Llama-3.3-70B-Instruct") + " --memory 64 --context 32k");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("327,680"), std::string::npos) << r.output;  // bf16 bytes per token
  EXPECT_NE(r.output.find("32,768 tokens"), std::string::npos);
  EXPECT_NE(r.output.find("--memory 64 GiB"), std::string::npos);
  // No weight files: the weights come from config.json's shapes, with a table of formats.
  EXPECT_NE(r.output.find("141,107,412,992 bytes, from config.json's shapes as bf16"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("parameters  70.55B total"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("mlx4-g64"), std::string::npos) << r.output;
}

TEST(PlanCli, WeightsFlagPicksOneFormat) {
  auto r = keel_plan(config("Qwen3-30B-A3B") + " --memory 24 --weights mlx4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["shapes"]["selected_format"], "mlx4-g64");
  EXPECT_NE(j["weights"]["source"].get<std::string>().find("as mlx4-g64"), std::string::npos);
  EXPECT_EQ(j["chosen_policy"], "full");  // 16 GiB of 4-bit weights fit 24 GiB; bf16's 57 would not
  r = keel_plan(config("Qwen3-30B-A3B") + " --memory 24 --weights mlx4");
  EXPECT_EQ(r.output.find("mlx8-g32"), std::string::npos) << r.output;  // the one row asked for
  r = keel_plan(config("Qwen3-30B-A3B") + " --weights Q4_K_M");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("plan the .gguf file itself"), std::string::npos) << r.output;
}

TEST(PlanCli, JsonForGptOss) {
  auto r = keel_plan(config("gpt-oss-20b") + " --json --memory 32 --kv-policy int8 --chat-template " +
                     (keel::test::shared_dir() / "fixtures/chat_templates/openai-gpt-oss-120b.jinja").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["weights"]["bytes"], 13761264768u);
  EXPECT_EQ(j["kv_bytes_per_token_growing"]["bf16"], 24576);
  EXPECT_EQ(j["requested_policy"], "int8");
  EXPECT_EQ(j["chosen_policy"], "int8");
  EXPECT_EQ(j["agent_gates"]["tool_call_format"], "harmony");
  EXPECT_EQ(j["agent_gates"]["keel_parses_tool_calls"], true);
  EXPECT_EQ(j["agent_gates"]["reasoning"], "always on");
  ASSERT_EQ(j["presets"].size(), 5u);  // full, int8, protect-k, protect, int4
  EXPECT_EQ(j["presets"][2]["policy"], "protect-k");
  EXPECT_EQ(j["ceiling"]["source"], "--memory 32 GiB");
  bool shard_warning = false;
  for (const auto& w : j["warnings"]) shard_warning |= w.get<std::string>().find("shard names disagree") != std::string::npos;
  EXPECT_TRUE(shard_warning);
}

// keel bench caches the bandwidth it measured; keel plan turns it into a decode estimate.
TEST(PlanCli, BenchCachesTheBandwidthThePlanEstimatesWith) {
  keel::test::TempDir cache;
  const std::string env = "KEEL_CACHE_DIR=" + cache.path().string() + " ";
  auto r = keel::test::run_command(env + keel::test::keel_binary().string() + " bench --model " +
                                   (keel::test::shared_dir() / "models/tiny-toolcaller").string() +
                                   " --prompt-tokens 8 --gen-tokens 2 --repeats 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(std::filesystem::exists(cache.path() / "machine_limits.json"));
  r = keel::test::run_command(env + keel::test::keel_binary().string() + " plan " + config("gpt-oss-120b") + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output)["shapes"];
  const double bandwidth = j["bandwidth_bytes_per_s"].get<double>();
  EXPECT_GT(bandwidth, 0);
  for (const auto& f : j["formats"]) {
    EXPECT_DOUBLE_EQ(f["estimated_decode_tokens_per_s"].get<double>(),
                     bandwidth / f["active_bytes_per_token"].get<double>());
  }
}

TEST(PlanCli, DefaultCeilingSaysWhereItCameFrom) {
  auto r = keel_plan(config("Qwen3-8B") + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_NE(j["ceiling"]["source"].get<std::string>().find("75% of"), std::string::npos);
}

TEST(PlanCli, ErrorsNameTheProblem) {
  auto r = keel_plan("/nonexistent/model");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("no such model folder or file"), std::string::npos) << r.output;
  r = keel_plan(config("Qwen3-8B") + " --kv-policy fp8");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("unknown KV policy 'fp8'"), std::string::npos) << r.output;
  r = keel_plan(config("Qwen3-8B") + " --context lots");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--context must be a positive number"), std::string::npos) << r.output;
  r = keel_plan("");
  EXPECT_EQ(r.exit_code, 1);
}
