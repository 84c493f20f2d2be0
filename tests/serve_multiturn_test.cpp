// A long-lived server and a Claude Code-shaped session: a 6k-token system prompt plus tools, then
// 20 turns of tool calls and results. From turn 2 on, everything the previous turn held (prompt and
// generated call) must come from the cache, and only the new tokens are prefilled.
#include <gtest/gtest.h>

#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;

int64_t count_tokens(httplib::Client& client, json request, const std::string& system) {
  request["system"] = system;
  const JsonResponse r = post_json(client, "/v1/messages/count_tokens", request);
  if (r.status != 200) throw std::runtime_error(r.text);
  return r.body["input_tokens"];
}

// The base system prompt followed by coding guidelines, until the prompt holds target_tokens.
std::string long_system_prompt(httplib::Client& client, const json& base, int64_t target_tokens) {
  const std::string paragraph =
      "\n\nGuideline: you are a careful coding assistant working in a large C++ repository. Read files "
      "before editing them, keep changes small, run the tests after every change, and explain what you "
      "did in one sentence. Never invent file names; list the directory first when unsure.";
  std::string system = base["system"];
  const int64_t base_tokens = count_tokens(client, base, system);
  const int64_t per_paragraph = count_tokens(client, base, system + paragraph) - base_tokens;
  for (int64_t n = base_tokens; n < target_tokens; n += per_paragraph) system += paragraph;
  return system;
}

TEST(ServeMultiTurn, OnlyNewTokensArePrefilledFromTurnTwoOn) {
  const json& session = session_fixture();
  ServerProcess server;
  // The cold first turn prefills 6k tokens: seconds in a Release build, minutes under ASan on a
  // 2-core AVX2 machine with another test beside it.
  auto client = server.client(std::chrono::seconds(600));
  json request = session["cases"][0]["request"];
  request["system"] = long_system_prompt(client, request, 6000);
  request["messages"] = json::array();

  const char* asks[] = {"What files are in /tmp?", "Show me the contents of /etc/hosts", "Run pwd",
                        "Execute `date`", "Make a directory /tmp/work"};
  int64_t previous_prompt = 0;
  for (int turn = 1; turn <= 20; ++turn) {
    json& messages = request["messages"];
    const std::string ask = asks[(turn - 1) % 5];
    if (!messages.empty() && messages.back()["role"] == "user") {
      messages.back()["content"].push_back({{"type", "text"}, {"text", ask}});
    } else {
      messages.push_back({{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", ask}}})}});
    }
    const JsonResponse r = post_json(client, "/v1/messages", request);
    ASSERT_EQ(r.status, 200) << "turn " << turn << ": " << r.text;
    const json& usage = r.body["usage"];
    const int64_t prefilled = usage["input_tokens"], cached = usage["cache_read_input_tokens"];
    const int64_t prompt = prefilled + cached;
    if (turn == 1) {
      EXPECT_GE(prompt, 6000);
      EXPECT_EQ(cached, 0);
    } else {
      // The whole previous prompt came from the cache (and usually the previous answer too).
      EXPECT_GE(cached, previous_prompt) << "turn " << turn;
      EXPECT_LT(prefilled, 200) << "turn " << turn;
    }
    previous_prompt = prompt;

    // The assistant's answer goes back into the history, each call with a result.
    messages.push_back({{"role", "assistant"}, {"content", r.body["content"]}});
    json results = json::array();
    for (const auto& block : r.body["content"])
      if (block["type"] == "tool_use")
        results.push_back({{"type", "tool_result"}, {"tool_use_id", block["id"]}, {"content", "done (turn " + std::to_string(turn) + ")"}});
    if (!results.empty()) messages.push_back({{"role", "user"}, {"content", results}});
  }
  std::printf("%s", server.log().c_str());
}

}  // namespace
}  // namespace keel::test
