// Text whose normalized form has other bytes (a decomposed "e\u0301" as macOS writes file names,
// U+212B, U+1FD3, Hangul jamo) in every part of a conversation, on every route of a real `keel
// serve` (Messages, count_tokens, Chat Completions, Responses): each answers 200, and count_tokens
// equals the tokens the answer's usage counts.
#include <gtest/gtest.h>

#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;

const std::vector<std::string> kOddTexts = {"Re\u0301sume\u0301.pdf", "\u212B", "\u1FD3",
                                            "\u1100\u1161\u11A8 a\u0307\u0323 \uFB01le"};

const json kAnthropicTools = json::parse(R"([{"name": "Bash", "description": "Run a command.",
  "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}])");

json anthropic_request(const std::string& odd) {
  json messages = json::array();
  messages.push_back({{"role", "user"}, {"content", "List the files in " + odd}});
  messages.push_back({{"role", "assistant"}, {"content", json::array({{{"type", "tool_use"}, {"id", "toolu_1"},
                        {"name", "Bash"}, {"input", {{"command", "ls " + odd}}}}})}});
  messages.push_back({{"role", "user"}, {"content", json::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_1"},
                        {"content", "notes.txt\n" + odd + "\ncafe\u0301.md"}}})}});
  return {{"model", "tiny-toolcaller"}, {"max_tokens", 4}, {"temperature", 0},
          {"system", "Work in the folder " + odd + "."}, {"tools", kAnthropicTools}, {"messages", messages}};
}

json openai_request(const std::string& odd) {
  json call = {{"id", "call_1"}, {"type", "function"},
               {"function", {{"name", "Bash"}, {"arguments", json{{"command", "ls " + odd}}.dump()}}}};
  json messages = json::array();
  messages.push_back({{"role", "system"}, {"content", "Work in the folder " + odd + "."}});
  messages.push_back({{"role", "user"}, {"content", "List the files in " + odd}});
  messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({call})}});
  messages.push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "notes.txt\n" + odd}});
  json tools = json::array({{{"type", "function"}, {"function", {{"name", "Bash"}, {"description", "Run a command."},
                              {"parameters", kAnthropicTools[0]["input_schema"]}}}}});
  return {{"model", "tiny-toolcaller"}, {"max_tokens", 4}, {"temperature", 0}, {"tools", tools}, {"messages", messages}};
}

json responses_request(const std::string& odd) {
  json input = json::array();
  input.push_back({{"role", "user"}, {"content", "List the files in " + odd}});
  input.push_back({{"type", "function_call"}, {"call_id", "call_1"}, {"name", "Bash"},
                   {"arguments", json{{"command", "ls " + odd}}.dump()}});
  input.push_back({{"type", "function_call_output"}, {"call_id", "call_1"}, {"output", "notes.txt\n" + odd}});
  json tools = json::array({{{"type", "function"}, {"name", "Bash"}, {"description", "Run a command."},
                             {"parameters", kAnthropicTools[0]["input_schema"]}}});
  return {{"model", "tiny-toolcaller"}, {"max_output_tokens", 4}, {"temperature", 0},
          {"instructions", "Work in the folder " + odd + "."}, {"tools", tools}, {"input", input}};
}

TEST(ServeNormalizedText, EveryRouteAnswersAndCountsTheTokensItPrefills) {
  ServerProcess server;
  auto client = server.client();
  for (const std::string& odd : kOddTexts) {
    SCOPED_TRACE(odd);
    const json request = anthropic_request(odd);
    const JsonResponse counted = post_json(client, "/v1/messages/count_tokens", request);
    ASSERT_EQ(counted.status, 200) << counted.text;

    const JsonResponse answer = post_json(client, "/v1/messages", request);
    ASSERT_EQ(answer.status, 200) << answer.text;
    const json& usage = answer.body["usage"];
    EXPECT_EQ(counted.body["input_tokens"].get<int64_t>(),
              usage["input_tokens"].get<int64_t>() + usage.value("cache_read_input_tokens", int64_t{0}) +
                  usage.value("cache_creation_input_tokens", int64_t{0}));

    json streamed = request;
    streamed["stream"] = true;
    const JsonResponse stream = post_json(client, "/v1/messages", streamed);
    ASSERT_EQ(stream.status, 200) << stream.text;
    const std::vector<SseEvent> events = parse_sse(stream.text);
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back().event, "message_stop") << stream.text;

    const JsonResponse chat = post_json(client, "/v1/chat/completions", openai_request(odd));
    ASSERT_EQ(chat.status, 200) << chat.text;
    EXPECT_GT(chat.body["usage"]["prompt_tokens"].get<int64_t>(), 20);

    const JsonResponse responses = post_json(client, "/v1/responses", responses_request(odd));
    ASSERT_EQ(responses.status, 200) << responses.text;
    EXPECT_GT(responses.body["usage"]["input_tokens"].get<int64_t>(), 20);
  }
}

}  // namespace
}  // namespace keel::test
