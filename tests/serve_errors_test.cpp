// Every client error gets its protocol's envelope and status, and the server keeps serving.
#include <gtest/gtest.h>

#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;

json hello(int max_tokens = 2) {
  return {{"model", "tiny-toolcaller"}, {"max_tokens", max_tokens},
          {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
}

void expect_anthropic_error(const JsonResponse& r, int status, const std::string& type) {
  EXPECT_EQ(r.status, status) << r.text;
  EXPECT_EQ(r.body["type"], "error") << r.text;
  EXPECT_EQ(r.body["error"]["type"], type) << r.text;
  EXPECT_TRUE(r.body["error"]["message"].is_string()) << r.text;
}

void expect_openai_error(const JsonResponse& r, int status) {
  EXPECT_EQ(r.status, status) << r.text;
  ASSERT_TRUE(r.body.is_object()) << r.text;
  EXPECT_FALSE(r.body.contains("type")) << r.text;
  EXPECT_TRUE(r.body["error"]["message"].is_string()) << r.text;
  EXPECT_TRUE(r.body["error"]["type"].is_string()) << r.text;
}

JsonResponse post_raw(httplib::Client& client, const std::string& path, const std::string& body) {
  auto res = client.Post(path, body, "application/json");
  if (!res) throw std::runtime_error("request failed");
  JsonResponse out;
  out.status = res->status;
  out.text = res->body;
  out.body = json::parse(res->body, nullptr, false);
  return out;
}

TEST(ServeErrors, ApiKeyIsRequiredOnEveryRouteButHealth) {
  ServerProcess server({"--api-key", "sekret"});
  auto client = server.client();
  expect_anthropic_error(post_json(client, "/v1/messages", hello()), 401, "authentication_error");
  expect_openai_error(post_json(client, "/v1/chat/completions", hello()), 401);
  EXPECT_EQ(client.Get("/v1/models")->status, 401);
  EXPECT_EQ(client.Get("/metrics")->status, 401);
  EXPECT_EQ(post_json(client, "/v1/messages", hello(), {{"x-api-key", "wrong"}}).status, 401);
  EXPECT_EQ(client.Get("/health")->status, 200);
  EXPECT_EQ(post_json(client, "/v1/messages", hello(), {{"x-api-key", "sekret"}}).status, 200);
  EXPECT_EQ(post_json(client, "/v1/chat/completions", hello(), {{"Authorization", "Bearer sekret"}}).status, 200);
}

TEST(ServeErrors, BadRequestsAreAnsweredInTheirEnvelope) {
  ServerProcess server({"--max-body-mb", "1"});
  auto client = server.client();
  expect_anthropic_error(post_raw(client, "/v1/messages", "{not json"), 400, "invalid_request_error");
  expect_openai_error(post_raw(client, "/v1/chat/completions", "{not json"), 400);
  json no_max = hello();
  no_max.erase("max_tokens");
  expect_anthropic_error(post_json(client, "/v1/messages", no_max), 400, "invalid_request_error");
  json bad_messages = hello();
  bad_messages["messages"] = "hi";
  expect_anthropic_error(post_json(client, "/v1/messages", bad_messages), 400, "invalid_request_error");
  expect_openai_error(post_json(client, "/v1/chat/completions", bad_messages), 400);
  json image = hello();
  image["messages"][0]["content"] = json::array(
      {{{"type", "image"}, {"source", {{"type", "base64"}, {"media_type", "image/png"}, {"data", "iVBORw0KGgo="}}}}});
  const JsonResponse img = post_json(client, "/v1/messages", image);
  expect_anthropic_error(img, 400, "invalid_request_error");
  EXPECT_NE(img.body["error"]["message"].get<std::string>().find("image"), std::string::npos);
  json wrong_type = hello();
  wrong_type["max_tokens"] = "many";
  expect_anthropic_error(post_json(client, "/v1/messages", wrong_type), 400, "invalid_request_error");

  // Nesting deep enough to overflow a recursive parser's stack.
  const std::string deep = "{\"model\":\"tiny-toolcaller\",\"max_tokens\":1,\"messages\":" + std::string(100000, '[') +
                           std::string(100000, ']') + "}";
  expect_anthropic_error(post_raw(client, "/v1/messages", deep), 400, "invalid_request_error");

  const std::string huge = "{\"model\":\"tiny-toolcaller\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"" +
                           std::string(2 << 20, 'a') + "\"}]}";
  expect_anthropic_error(post_raw(client, "/v1/messages", huge), 413, "request_too_large");
  expect_openai_error(post_raw(client, "/v1/chat/completions", huge), 413);

  auto missing = client.Get("/v1/nothing-here");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(json::parse(missing->body)["error"]["type"], "not_found_error");

  // The Responses route, and OpenAI's 400s name the field as `param`.
  expect_openai_error(post_raw(client, "/v1/responses", "{not json"), 400);
  const JsonResponse no_input = post_json(client, "/v1/responses", {{"model", "tiny-toolcaller"}});
  expect_openai_error(no_input, 400);
  EXPECT_EQ(no_input.body["error"]["param"], "input");
  EXPECT_EQ(post_json(client, "/v1/chat/completions", bad_messages).body["error"]["param"], "messages");
  expect_openai_error(post_raw(client, "/v1/responses", huge), 413);
  // Paths under a resource only OpenAI has answer 404 in OpenAI's envelope.
  for (const char* path : {"/v1/embeddings", "/v1/chat/nothing", "/v1/responses/resp_1", "/v1/audio/speech"}) {
    auto r = client.Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 404) << path;
    const json body = json::parse(r->body);
    EXPECT_TRUE(body["error"].contains("param") && !body.contains("type")) << path << ": " << r->body;
  }

  // Still serving.
  EXPECT_EQ(post_json(client, "/v1/messages", hello()).status, 200);
  EXPECT_TRUE(server.running());
}

TEST(ServeErrors, UnknownRoleIsABadRequest) {
  ServerProcess server;
  auto client = server.client();
  json request = hello();
  request["messages"][0]["role"] = "wizard";
  expect_anthropic_error(post_json(client, "/v1/messages", request), 400, "invalid_request_error");
  EXPECT_EQ(post_json(client, "/v1/messages", hello()).status, 200);
}

TEST(ServeErrors, HealthAndMetricsDescribeTheServer) {
  ServerProcess server;
  auto client = server.client();
  ASSERT_EQ(post_json(client, "/v1/messages", hello(4)).status, 200);
  auto health = client.Get("/health");
  ASSERT_TRUE(health);
  const json h = json::parse(health->body);
  EXPECT_EQ(h["status"], "ok");
  EXPECT_EQ(h["model"], "tiny-toolcaller");
  EXPECT_EQ(h["queue"]["waiting"], 0);
  EXPECT_GT(h["kv"]["used_tokens"].get<int64_t>(), 0);
  EXPECT_GT(h["kv"]["used_bytes"].get<int64_t>(), 0);
  EXPECT_LE(h["kv"]["used_bytes"].get<int64_t>(), h["kv"]["budget_bytes"].get<int64_t>());
  EXPECT_EQ(h["kv"]["requantizations"], 0);
  EXPECT_GT(h["memory"]["resident_bytes"].get<int64_t>(), 0);
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("keel_http_responses_total{route=\"/v1/messages\",status=\"200\"} 1"), std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("keel_tokens_total{kind=\"output\"} 4"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("keel_tool_calls_total{result=\"invalid\"} 0"), std::string::npos);
}

}  // namespace
}  // namespace keel::test
