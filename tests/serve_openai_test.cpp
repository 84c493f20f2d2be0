// The OpenAI Chat Completions API of a real `keel serve` on tiny-toolcaller, over HTTP.
#include <gtest/gtest.h>

#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;

// The first session request, in OpenAI form.
json tool_request() {
  const json& session = session_fixture();
  const json& a = session["cases"][0]["request"];
  json tools = json::array();
  for (const auto& t : a["tools"])
    tools.push_back({{"type", "function"},
                     {"function", {{"name", t["name"]}, {"description", t["description"]}, {"parameters", t["input_schema"]}}}});
  return {{"model", "tiny-toolcaller"},
          {"max_tokens", a["max_tokens"]},
          {"temperature", 0},
          {"messages", json::array({{{"role", "system"}, {"content", a["system"]}}, a["messages"][0]})},
          {"tools", tools}};
}

int64_t reference_prompt_tokens() {
  const json& session = session_fixture();
  return session["cases"][0]["prompt_tokens"];
}

TEST(ServeOpenAI, ToolCallAnswer) {
  ServerProcess server;
  auto client = server.client();
  const JsonResponse r = post_json(client, "/v1/chat/completions", tool_request());
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(r.body["object"], "chat.completion");
  EXPECT_EQ(r.body["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  const json& choice = r.body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << r.text;
  const json& call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "Bash");
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()), json({{"command", "ls /tmp"}}));
  EXPECT_EQ(r.body["usage"]["prompt_tokens"], reference_prompt_tokens());
  EXPECT_EQ(r.body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(r.body["usage"]["total_tokens"].get<int64_t>(),
            r.body["usage"]["prompt_tokens"].get<int64_t>() + r.body["usage"]["completion_tokens"].get<int64_t>());
}

TEST(ServeOpenAI, StreamedToolCallWithUsage) {
  ServerProcess server;
  auto client = server.client();
  json request = tool_request();
  request["stream"] = true;
  request["stream_options"] = {{"include_usage", true}};
  auto res = client.Post("/v1/chat/completions", request.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json out = replay_openai_stream(parse_sse(res->body));
  EXPECT_EQ(out["finish_reason"], "tool_calls");
  ASSERT_EQ(out["tool_calls"].size(), 1u) << res->body;
  EXPECT_EQ(out["tool_calls"][0]["name"], "Bash");
  EXPECT_EQ(json::parse(out["tool_calls"][0]["arguments"].get<std::string>()), json({{"command", "ls /tmp"}}));
  ASSERT_TRUE(out["usage"].is_object()) << res->body;
  EXPECT_EQ(out["usage"]["prompt_tokens"], reference_prompt_tokens());
}

TEST(ServeOpenAI, StreamedTextEqualsTheWholeAnswer) {
  ServerProcess server;
  auto client = server.client();
  json request = {{"model", "tiny-toolcaller"}, {"max_tokens", 20}, {"temperature", 0},
                  {"messages", json::array({{{"role", "user"}, {"content", "Tell me about the moon."}}})}};
  const JsonResponse whole = post_json(client, "/v1/chat/completions", request);
  ASSERT_EQ(whole.status, 200) << whole.text;
  request["stream"] = true;
  auto res = client.Post("/v1/chat/completions", request.dump(), "application/json");
  ASSERT_TRUE(res);
  const json out = replay_openai_stream(parse_sse(res->body));
  EXPECT_EQ(out["content"], whole.body["choices"][0]["message"]["content"]);
  EXPECT_EQ(out["finish_reason"], whole.body["choices"][0]["finish_reason"]);
  EXPECT_TRUE(out["usage"].is_null());  // only with stream_options.include_usage
  // The second request reused the first one's prompt.
  EXPECT_GT(whole.body["usage"]["prompt_tokens"].get<int64_t>(), 5);
}

TEST(ServeOpenAI, ToolResultRoundTrip) {
  ServerProcess server;
  auto client = server.client();
  json request = tool_request();
  const JsonResponse first = post_json(client, "/v1/chat/completions", request);
  ASSERT_EQ(first.status, 200) << first.text;
  const json message = first.body["choices"][0]["message"];
  ASSERT_FALSE(message["tool_calls"].empty());
  request["messages"].push_back(message);
  request["messages"].push_back(
      {{"role", "tool"}, {"tool_call_id", message["tool_calls"][0]["id"]}, {"content", "notes.txt\nreport.pdf"}});
  const JsonResponse second = post_json(client, "/v1/chat/completions", request);
  ASSERT_EQ(second.status, 200) << second.text;
  EXPECT_GT(second.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), reference_prompt_tokens());
}

}  // namespace
}  // namespace keel::test
