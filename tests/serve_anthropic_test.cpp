// The Anthropic Messages API of a real `keel serve` on tiny-toolcaller, over HTTP.
#include <gtest/gtest.h>

#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;

json session_case(size_t i) {
  const json& session = session_fixture();
  return session.at("cases").at(i);
}

json first_request() { return session_case(0).at("request"); }

json text_request(const std::string& text, int max_tokens = 24) {
  return {{"model", "tiny-toolcaller"}, {"max_tokens", max_tokens}, {"temperature", 0},
          {"messages", json::array({{{"role", "user"}, {"content", text}}})}};
}

TEST(ServeAnthropic, ToolUseAnswer) {
  ServerProcess server;
  auto client = server.client();
  const JsonResponse r = post_json(client, "/v1/messages", first_request());
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(r.body["type"], "message");
  EXPECT_EQ(r.body["role"], "assistant");
  EXPECT_EQ(r.body["model"], "tiny-toolcaller");
  EXPECT_EQ(r.body["stop_reason"], "tool_use");
  ASSERT_EQ(r.body["content"].size(), 1u) << r.text;
  const json& call = r.body["content"][0];
  EXPECT_EQ(call["type"], "tool_use");
  EXPECT_EQ(call["name"], "Bash");
  EXPECT_EQ(call["input"], json({{"command", "ls /tmp"}}));
  EXPECT_EQ(call["id"].get<std::string>().rfind("toolu_", 0), 0u);
  const json& usage = r.body["usage"];
  EXPECT_EQ(usage["input_tokens"].get<int64_t>() + usage["cache_read_input_tokens"].get<int64_t>(),
            session_case(0)["prompt_tokens"].get<int64_t>());
  EXPECT_GT(usage["output_tokens"].get<int64_t>(), 5);
  // The physical model is named in a header of every response: its folder name (the absolute path
  // only for a caller that presents the API key, see ServeSecurity), the full path in the log.
  auto it = r.headers.find("x-keel-model");
  ASSERT_NE(it, r.headers.end());
  EXPECT_EQ(it->second, "tiny-toolcaller");
  EXPECT_NE(server.log().find(std::filesystem::canonical(tiny_toolcaller_dir()).string()), std::string::npos);
}

TEST(ServeAnthropic, StreamedToolUseFollowsTheEventGrammar) {
  ServerProcess server;
  auto client = server.client();
  json request = first_request();
  request["stream"] = true;
  auto res = client.Post("/v1/messages", request.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(res->get_header_value("Content-Type").rfind("text/event-stream", 0), 0u);
  const auto events = parse_sse(res->body);
  const json message = replay_anthropic_stream(events);
  EXPECT_EQ(message["stop_reason"], "tool_use");
  ASSERT_EQ(message["content"].size(), 1u) << res->body;
  EXPECT_EQ(message["content"][0]["name"], "Bash");
  EXPECT_EQ(message["content"][0]["input"], json({{"command", "ls /tmp"}}));
  EXPECT_GT(message["usage"]["output_tokens"].get<int64_t>(), 5);
}

TEST(ServeAnthropic, StreamedTextHasNoEmptyBlocksAndMatchesTheWholeAnswer) {
  ServerProcess server;
  auto client = server.client();
  const json request = text_request("Say hello to the user.", 20);
  const JsonResponse whole = post_json(client, "/v1/messages", request);
  ASSERT_EQ(whole.status, 200) << whole.text;
  json streamed_request = request;
  streamed_request["stream"] = true;
  auto res = client.Post("/v1/messages", streamed_request.dump(), "application/json");
  ASSERT_TRUE(res);
  const json message = replay_anthropic_stream(parse_sse(res->body));
  EXPECT_EQ(message["stop_reason"], whole.body["stop_reason"]);
  EXPECT_EQ(message["content"], whole.body["content"]) << res->body;
  EXPECT_EQ(message["usage"]["output_tokens"], whole.body["usage"]["output_tokens"]);
}

TEST(ServeAnthropic, ToolRoundTrip) {
  ServerProcess server;
  auto client = server.client();
  json request = first_request();
  const JsonResponse first = post_json(client, "/v1/messages", request);
  ASSERT_EQ(first.status, 200) << first.text;
  ASSERT_EQ(first.body["content"][0]["type"], "tool_use");
  request["messages"].push_back({{"role", "assistant"}, {"content", first.body["content"]}});
  request["messages"].push_back(
      {{"role", "user"},
       {"content", json::array({{{"type", "tool_result"}, {"tool_use_id", first.body["content"][0]["id"]},
                                 {"content", "notes.txt\nreport.pdf"}}})}});
  const JsonResponse second = post_json(client, "/v1/messages", request);
  ASSERT_EQ(second.status, 200) << second.text;
  EXPECT_FALSE(second.body["content"].empty());
  // The second turn reuses the first one's prompt and its generated call from the cache.
  EXPECT_GT(second.body["usage"]["cache_read_input_tokens"].get<int64_t>(),
            session_case(0)["prompt_tokens"].get<int64_t>());
}

TEST(ServeAnthropic, CountTokensEqualsTheRequestsInputTokens) {
  ServerProcess server;
  auto client = server.client();
  for (size_t i : {0u, 12u, 13u}) {
    json request = session_case(i)["request"];
    const JsonResponse counted = post_json(client, "/v1/messages/count_tokens", request);
    ASSERT_EQ(counted.status, 200) << counted.text;
    EXPECT_EQ(counted.body["input_tokens"], session_case(i)["prompt_tokens"]) << "case " << i;
  }
  // On a fresh server nothing is cached: input_tokens is the whole prompt.
  ServerProcess fresh;
  auto fresh_client = fresh.client();
  const JsonResponse r = post_json(fresh_client, "/v1/messages", session_case(12)["request"]);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["usage"]["input_tokens"], session_case(12)["prompt_tokens"]);
  EXPECT_EQ(r.body["usage"]["cache_read_input_tokens"], 0);
}

TEST(ServeAnthropic, BillingHeaderSystemBlockIsRemoved) {
  ServerProcess server;
  auto client = server.client();
  json plain = first_request();
  json with_header = plain;
  with_header["system"] = json::array({{{"type", "text"}, {"text", "x-anthropic-billing-header: cc_version=2.1.3; cch=8f2a1"}},
                                       {{"type", "text"}, {"text", plain["system"]}}});
  const JsonResponse a = post_json(client, "/v1/messages/count_tokens", plain);
  const JsonResponse b = post_json(client, "/v1/messages/count_tokens", with_header);
  ASSERT_EQ(a.status, 200);
  ASSERT_EQ(b.status, 200) << b.text;
  EXPECT_EQ(a.body["input_tokens"], b.body["input_tokens"]);
}

TEST(ServeAnthropic, StopSequenceAndMaxTokens) {
  ServerProcess server;
  auto client = server.client();
  const json request = text_request("Write a short poem about the sea.", 40);
  const JsonResponse whole = post_json(client, "/v1/messages", request);
  ASSERT_EQ(whole.status, 200) << whole.text;
  ASSERT_EQ(whole.body["content"][0]["type"], "text");
  const std::string text = whole.body["content"][0]["text"];
  ASSERT_GE(text.size(), 12u) << text;
  const std::string stop = text.substr(text.size() / 2, 3);

  json stopped = request;
  stopped["stop_sequences"] = json::array({stop});
  const JsonResponse s = post_json(client, "/v1/messages", stopped);
  ASSERT_EQ(s.status, 200) << s.text;
  EXPECT_EQ(s.body["stop_reason"], "stop_sequence");
  EXPECT_EQ(s.body["stop_sequence"], stop);
  const std::string cut = s.body["content"].empty() ? "" : s.body["content"][0]["text"].get<std::string>();
  EXPECT_EQ(cut, text.substr(0, text.find(stop)).substr(0, cut.size()));
  EXPECT_EQ(cut.find(stop), std::string::npos);

  json limited = request;
  limited["max_tokens"] = 3;
  const JsonResponse m = post_json(client, "/v1/messages", limited);
  ASSERT_EQ(m.status, 200) << m.text;
  EXPECT_EQ(m.body["stop_reason"], "max_tokens");
  EXPECT_EQ(m.body["usage"]["output_tokens"], 3);
}

TEST(ServeAnthropic, ModelNamesResolveExactly) {
  ServerProcess server({"--alias", "claude-sonnet-4-6"});
  auto client = server.client();
  json request = text_request("hi", 2);
  request["model"] = "claude-sonnet-4-6";
  EXPECT_EQ(post_json(client, "/v1/messages", request).status, 200);
  request["model"] = "claude-opus-4-1";
  const JsonResponse missing = post_json(client, "/v1/messages", request);
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body["type"], "error");
  EXPECT_EQ(missing.body["error"]["type"], "not_found_error");
  const std::string message = missing.body["error"]["message"];
  EXPECT_NE(message.find("tiny-toolcaller"), std::string::npos) << message;
  EXPECT_NE(message.find("claude-sonnet-4-6"), std::string::npos) << message;

  auto models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  const json list = json::parse(models->body);
  ASSERT_EQ(list["data"].size(), 2u);
  EXPECT_EQ(list["data"][0]["id"], "tiny-toolcaller");
  EXPECT_EQ(list["data"][1]["id"], "claude-sonnet-4-6");

  ServerProcess any({"--alias", "*"});
  auto any_client = any.client();
  EXPECT_EQ(post_json(any_client, "/v1/messages", request).status, 200);
  EXPECT_NE(any.log().find("--alias '*'"), std::string::npos);
}

}  // namespace
}  // namespace keel::test
