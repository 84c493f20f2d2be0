// keel serve plans memory with the same planner as `keel plan` before loading anything.
#include <gtest/gtest.h>

#include <cstdio>

#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;

json plan_presets(int64_t context) {
  const CommandResult r = run_command(keel_binary().string() + " plan " + tiny_toolcaller_dir().string() +
                                          " --context " + std::to_string(context) + " --json",
                                      false);
  if (r.exit_code != 0) throw std::runtime_error(r.output);
  return json::parse(r.output)["presets"];
}

json health(const ServerProcess& server) {
  auto client = server.client();
  auto res = client.Get("/health");
  if (!res) throw std::runtime_error("no /health");
  return json::parse(res->body);
}

TEST(ServePlan, AutoTakesTheMostPreciseFittingPreset) {
  const json presets = plan_presets(32768);
  ASSERT_EQ(presets[0]["policy"], "full");
  ASSERT_EQ(presets[1]["policy"], "int8");
  // A ceiling between what int8 and full need at this context: full no longer fits, int8 does.
  const double between = (presets[0]["total_bytes"].get<double>() + presets[1]["total_bytes"].get<double>()) / 2;
  char gib[32];
  std::snprintf(gib, sizeof gib, "%.6f", between / (1u << 30));
  ServerProcess server({"--context", "32768", "--memory", gib});
  EXPECT_NE(server.log().find("auto: the most precise preset that fits is int8"), std::string::npos) << server.log();
  const json h = health(server);
  EXPECT_EQ(h["kv"]["policy"], "sink=0 recent=0 default=int8");
  EXPECT_LE(h["kv"]["budget_bytes"].get<double>(), between);

  ServerProcess roomy({"--context", "32768"});
  EXPECT_EQ(health(roomy)["kv"]["policy"], "sink=0 recent=0 default=bf16");
}

TEST(ServePlan, ExplicitPolicySpecIsServed) {
  ServerProcess server({"--kv-policy", "tools=bf16 system=bf16 sink=4 recent=64 tool_call=int8 default=int4"});
  const json h = health(server);
  EXPECT_EQ(h["kv"]["policy"], "system=bf16 tools=bf16 tool_call=int8 sink=4 recent=64 default=int4");
  EXPECT_EQ(h["kv"]["rotate"], true);
  auto client = server.client();
  const json& session = session_fixture();
  const JsonResponse r = post_json(client, "/v1/messages", session["cases"][0]["request"]);
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(r.body["content"][0]["input"], json({{"command", "ls /tmp"}}));
  const json after = health(server);
  EXPECT_GT(after["kv"]["bytes_by_format"]["int4"].get<int64_t>(), 0);
  EXPECT_EQ(after["kv"]["requantizations"], 0);
}

TEST(ServePlan, RefusesWhatCannotFitWithThePlan) {
  const CommandResult r = run_command(keel_binary().string() + " serve --model " + tiny_toolcaller_dir().string() +
                                      " --context 32768 --memory 0.001 --port 0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("keel serve: error:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("weights"), std::string::npos) << r.output;  // the plan is in the message
  const CommandResult bad = run_command(keel_binary().string() + " serve --model " + tiny_toolcaller_dir().string() +
                                        " --kv-policy \"default=int3\" --port 0");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("int3"), std::string::npos) << bad.output;
  const CommandResult format = run_command(keel_binary().string() + " serve --model " + tiny_toolcaller_dir().string() +
                                           " --tool-call-format smoke-signals --port 0");
  EXPECT_EQ(format.exit_code, 1);
  EXPECT_NE(format.output.find("hermes"), std::string::npos) << format.output;
}

}  // namespace
}  // namespace keel::test
