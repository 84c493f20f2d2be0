// What `keel serve` tells clients and operators about each request: a request id on every
// response, models.retrieve for both SDKs, error lines on stderr, bounded /metrics series, one
// source for the prefix-cache numbers of /health and /metrics, and a --context the model can hold.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;

json hello(const std::string& model = "tiny-toolcaller", int max_tokens = 2) {
  return {{"model", model}, {"max_tokens", max_tokens},
          {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
}

// The value of a sample on /metrics, `series` being its name and labels as printed.
double metric(httplib::Client& client, const std::string& series) {
  auto res = client.Get("/metrics");
  if (!res) throw std::runtime_error("no /metrics");
  const size_t at = res->body.find("\n" + series + " ");
  if (at == std::string::npos) throw std::runtime_error(series + " not on /metrics:\n" + res->body);
  return std::stod(res->body.substr(at + series.size() + 2));
}

std::string request_id_of(const httplib::Headers& headers) {
  auto it = headers.find("request-id");
  if (it == headers.end()) return "";
  auto x = headers.find("x-request-id");
  EXPECT_NE(x, headers.end());
  if (x != headers.end()) {
    EXPECT_EQ(x->second, it->second);
  }
  return it->second;
}

TEST(ServeObservability, EveryResponseHasARequestId) {
  ServerProcess server;
  auto client = server.client();
  std::vector<std::string> ids;
  auto expect_id = [&](const httplib::Headers& headers, const std::string& what) {
    const std::string id = request_id_of(headers);
    EXPECT_EQ(id.rfind("req_", 0), 0u) << what << ": '" << id << "'";
    EXPECT_EQ(id.size(), 28u) << what;
    ids.push_back(id);
  };
  expect_id(client.Get("/health")->headers, "health");
  expect_id(client.Get("/v1/models")->headers, "models");
  expect_id(client.Get("/metrics")->headers, "metrics");
  expect_id(client.Get("/no/such/route")->headers, "404");
  expect_id(client.Options("/v1/messages")->headers, "OPTIONS");
  expect_id(client.Get("/health", {{"Origin", "http://evil.example"}})->headers, "403");
  expect_id(post_json(client, "/v1/messages", hello()).headers, "messages");
  expect_id(post_json(client, "/v1/chat/completions", hello()).headers, "chat");
  expect_id(client.Post("/v1/messages", "{not json", "application/json")->headers, "400");
  expect_id(client.Post("/v1/messages", "{}", "text/plain")->headers, "415");
  json stream = hello();
  stream["stream"] = true;
  auto streamed = client.Post("/v1/messages", stream.dump(), "application/json");
  ASSERT_TRUE(streamed);
  EXPECT_EQ(streamed->status, 200);
  EXPECT_FALSE(parse_sse(streamed->body).empty());
  expect_id(streamed->headers, "stream");
  // A request line the server cannot parse is still answered with an id.
  const RawResponse garbage = raw_request(server.port(), "NOT A REQUEST\r\n\r\n");
  EXPECT_EQ(garbage.status, 400);
  expect_id(garbage.headers, "unparsable");
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), ids.size()) << "request ids repeat";
}

TEST(ServeObservability, ModelsRetrieveInBothShapes) {
  ServerProcess server({"--alias", "claude-sonnet-4-6"});
  auto client = server.client();
  for (const std::string name : {"tiny-toolcaller", "claude-sonnet-4-6"}) {
    auto res = client.Get("/v1/models/" + name);
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    const json m = json::parse(res->body);
    EXPECT_EQ(m["type"], "model");  // Anthropic
    EXPECT_EQ(m["id"], name);
    EXPECT_EQ(m["display_name"], name);
    EXPECT_TRUE(m["created_at"].is_string());
    EXPECT_EQ(m["object"], "model");  // OpenAI
    EXPECT_TRUE(m["created"].is_number_integer());
    EXPECT_EQ(m["owned_by"], "keel");
  }
  auto missing = client.Get("/v1/models/gpt-4o");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  const json e = json::parse(missing->body);
  EXPECT_EQ(e["type"], "error");                     // Anthropic's envelope...
  EXPECT_EQ(e["error"]["type"], "not_found_error");
  EXPECT_EQ(e["error"]["code"], "model_not_found");  // ...with OpenAI's code
  EXPECT_NE(e["error"]["message"].get<std::string>().find("claude-sonnet-4-6"), std::string::npos);
  EXPECT_NE(metric(client, "keel_http_responses_total{route=\"/v1/models/{id}\",status=\"404\"}"), 0);

  ServerProcess any({"--alias", "*"});
  auto any_client = any.client();
  auto whatever = any_client.Get("/v1/models/gpt-4o");
  ASSERT_TRUE(whatever);
  EXPECT_EQ(whatever->status, 200);
  EXPECT_EQ(json::parse(whatever->body)["id"], "gpt-4o");
}

TEST(ServeObservability, UnknownModelHasOpenAICode) {
  ServerProcess server;
  auto client = server.client();
  const JsonResponse openai = post_json(client, "/v1/chat/completions", hello("gpt-4o"));
  EXPECT_EQ(openai.status, 404) << openai.text;
  EXPECT_EQ(openai.body["error"]["code"], "model_not_found") << openai.text;
  EXPECT_EQ(openai.body["error"]["type"], "invalid_request_error") << openai.text;
  const JsonResponse anthropic = post_json(client, "/v1/messages", hello("gpt-4o"));
  EXPECT_EQ(anthropic.status, 404) << anthropic.text;
  EXPECT_EQ(anthropic.body["error"]["type"], "not_found_error") << anthropic.text;
}

TEST(ServeObservability, ErrorsAreLoggedWithTheirRequestId) {
  ServerProcess server;
  auto client = server.client();
  json bad = hello();
  bad["max_tokens"] = "many";
  bad["messages"][0]["content"] = "secret-body-marker";
  const JsonResponse invalid = post_json(client, "/v1/messages", bad);
  ASSERT_EQ(invalid.status, 400) << invalid.text;
  auto missing = client.Get("/no/such/route");
  ASSERT_TRUE(missing);
  auto cross = client.Post("/v1/messages", {{"Origin", "http://evil.example"}}, bad.dump(), "text/plain");
  ASSERT_TRUE(cross);
  auto fine = client.Get("/health");
  ASSERT_TRUE(fine);
  // Claude Code accepts compressed answers: the reason is logged all the same.
  auto compressed =
      client.Post("/v1/messages", {{"Accept-Encoding", "gzip, deflate, br, zstd"}}, bad.dump(), "application/json");
  ASSERT_TRUE(compressed);
  ASSERT_EQ(compressed->status, 400);

  // The logger writes once the response is out, on the connection's thread: wait for every line.
  const std::string cross_id = request_id_of(cross->headers);
  const std::string compressed_id = request_id_of(compressed->headers);
  std::string log = server.log();
  for (int i = 0; i < 500; ++i) {
    bool all = true;
    for (const auto& id : {request_id_of(invalid.headers), request_id_of(missing->headers), cross_id, compressed_id})
      all = all && log.find(id) != std::string::npos;
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    log = server.log();
  }
  const std::string message = invalid.body["error"]["message"];
  EXPECT_NE(log.find("keel serve: " + request_id_of(invalid.headers) + " POST /v1/messages -> 400: " + message),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("keel serve: " + request_id_of(missing->headers) + " GET /no/such/route -> 404: no route"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find(cross_id + " POST /v1/messages -> 403: requests from web pages are refused"), std::string::npos)
      << log;
  EXPECT_NE(log.find("keel serve: " + compressed_id + " POST /v1/messages -> 400: " + message), std::string::npos)
      << log;
  EXPECT_EQ(log.find("secret-body-marker"), std::string::npos) << log;
  EXPECT_EQ(log.find(request_id_of(fine->headers)), std::string::npos) << "a 200 was logged:\n" << log;
}

TEST(ServeObservability, UnknownPathsShareOneMetricsSeries) {
  ServerProcess server;
  auto client = server.client();
  for (const char* path : {"/a/1", "/b/2", "/v1/c/3"}) EXPECT_EQ(client.Get(path)->status, 404);
  EXPECT_EQ(metric(client, "keel_http_responses_total{route=\"other\",status=\"404\"}"), 3);
  const std::string text = client.Get("/metrics")->body;
  for (const char* path : {"/a/1", "/b/2", "/v1/c/3"}) EXPECT_EQ(text.find(path), std::string::npos) << path;
}

TEST(ServeObservability, HealthAndMetricsAgreeOnPrefixReuse) {
  ServerProcess server;
  auto client = server.client();
  // The same conversation twice: the second turn reuses the live sequence (not a pool open()).
  ASSERT_EQ(post_json(client, "/v1/messages", hello("tiny-toolcaller", 4)).status, 200);
  const JsonResponse again = post_json(client, "/v1/messages", hello("tiny-toolcaller", 4));
  ASSERT_EQ(again.status, 200) << again.text;
  const int64_t cached = again.body["usage"]["cache_read_input_tokens"];
  ASSERT_GT(cached, 0) << again.text;

  const json prefix = json::parse(client.Get("/health")->body)["kv"]["prefix_cache"];
  EXPECT_EQ(prefix["hits"], 1) << prefix;
  EXPECT_EQ(prefix["misses"], 1) << prefix;
  EXPECT_DOUBLE_EQ(prefix["hit_rate"].get<double>(), 0.5) << prefix;
  EXPECT_EQ(prefix["reused_tokens"], cached) << prefix;
  EXPECT_EQ(metric(client, "keel_prefix_cache_hits_total"), prefix["hits"].get<double>());
  EXPECT_EQ(metric(client, "keel_prefix_cache_misses_total"), prefix["misses"].get<double>());
  EXPECT_EQ(metric(client, "keel_prefix_cache_hit_rate"), prefix["hit_rate"].get<double>());
  EXPECT_EQ(metric(client, "keel_tokens_total{kind=\"cached\"}"), prefix["reused_tokens"].get<double>());
}

TEST(ServeObservability, ContextBeyondTheModelIsRefusedAtStart) {
  // tiny-toolcaller's config.json: max_position_embeddings 32768.
  const CommandResult r = run_command(keel_binary().string() + " serve --model " + tiny_toolcaller_dir().string() +
                                      " --context 40000 --port 0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--context 40000"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("max_position_embeddings (32768"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("listening"), std::string::npos) << r.output;
  // At the limit it serves.
  ServerProcess at_limit({"--context", "32768"});
  EXPECT_TRUE(at_limit.running());
}

}  // namespace
}  // namespace keel::test
