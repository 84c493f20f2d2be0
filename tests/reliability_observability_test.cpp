// Observability without injection: whatever a client puts in a path, a header or a model name
// reaches keel serve's log escaped onto its own line (api/log_text.h), and /metrics' series come
// from a fixed set of routes whatever paths are asked for.
#include <gtest/gtest.h>

#include <thread>

#include "keel/api/log_text.h"
#include "keel/api/metrics.h"
#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;

// Waits until every id is in the server's log (the error logger writes after the response is out).
std::string log_with(const ServerProcess& server, const std::vector<std::string>& ids) {
  std::string log = server.log();
  for (int i = 0; i < 500; ++i) {
    bool all = true;
    for (const auto& id : ids) all = all && log.find(id) != std::string::npos;
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    log = server.log();
  }
  return log;
}

// No byte of the log may be a control character other than the newline ending each line.
void expect_no_controls(const std::string& log) {
  for (size_t i = 0; i < log.size(); ++i) {
    const auto c = static_cast<unsigned char>(log[i]);
    EXPECT_TRUE(c == '\n' || (c >= 0x20 && c != 0x7f)) << "byte " << int(c) << " at " << i << " in:\n" << log;
  }
}

// True when some line of `text` starts with `prefix`.
bool has_line_starting(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0 || text.find("\n" + prefix) != std::string::npos;
}

TEST(ReliabilityObservability, LogSafeKeepsTextOnOneLine) {
  EXPECT_EQ(api::log_safe("POST /v1/messages model \"qwen\""), "POST /v1/messages model \"qwen\"");
  EXPECT_EQ(api::log_safe("a\nkeel serve: forged\r\x1b[31m"), "a\\x0akeel serve: forged\\x0d\\x1b[31m");
  EXPECT_EQ(api::log_safe(std::string("nul\0del\x7f", 8)), "nul\\x00del\\x7f");
  // A backslash is doubled, so an escape the client typed cannot pass for one keel wrote.
  EXPECT_EQ(api::log_safe("\\x0a"), "\\\\x0a");
  // Non-ASCII bytes (UTF-8 here; C1 controls and bidi overrides are multi-byte too) are escaped.
  EXPECT_EQ(api::log_safe("caf\xc3\xa9 \xe2\x80\xae"), "caf\\xc3\\xa9 \\xe2\\x80\\xae");
  EXPECT_EQ(api::log_safe("abcdef", 3), "abc...");
  EXPECT_EQ(api::log_safe("abc", 3), "abc");
  const std::string all_bytes = [] {
    std::string s;
    for (int c = 0; c < 256; ++c) s += static_cast<char>(c);
    return s;
  }();
  for (char c : api::log_safe(all_bytes, 1000)) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << int(c);
}

TEST(ReliabilityObservability, MetricsLabelsCannotAddLines) {
  api::Metrics metrics;
  metrics.count_response("/v1/messages", 200);
  metrics.count_response("x\",status=\"1\"} 1\nforged_metric 99\n# TYPE", 404);
  const std::string page = metrics.prometheus({});
  EXPECT_FALSE(has_line_starting(page, "forged_metric")) << page;
  size_t at = 0;
  while (at < page.size()) {
    const size_t end = page.find('\n', at);
    const std::string line = page.substr(at, end - at);
    EXPECT_TRUE(line.rfind("# HELP keel_", 0) == 0 || line.rfind("# TYPE keel_", 0) == 0 || line.rfind("keel_", 0) == 0)
        << line;
    at = end == std::string::npos ? page.size() : end + 1;
  }
  EXPECT_NE(page.find("keel_http_responses_total{route=\"/v1/messages\",status=\"200\"} 1\n"), std::string::npos) << page;
}

TEST(ReliabilityObservability, CraftedPathsForgeNoLogLinesOrSeries) {
  for (const bool keyed : {false, true}) {
    SCOPED_TRACE(keyed ? "with --api-key (the caller presents none)" : "without a key");
    ServerProcess server(keyed ? std::vector<std::string>{"--api-key", "sekret"} : std::vector<std::string>{});
    auto client = server.client();
    std::vector<std::string> ids;
    for (const char* path : {"/x%0Akeel%20serve:%20forged-line%1B%5B31m", "/y%0D%0Aforged_metric%2099",
                             "/v1/models/%0Aforged-model"}) {
      auto res = client.Get(path);
      ASSERT_TRUE(res) << path;
      EXPECT_EQ(res->status, keyed ? 401 : 404) << path;
      ids.push_back(res->get_header_value("request-id"));
    }
    const std::string log = log_with(server, ids);
    for (const auto& id : ids) EXPECT_NE(log.find(id), std::string::npos) << log;
    EXPECT_FALSE(has_line_starting(log, "keel serve: forged")) << log;
    EXPECT_FALSE(has_line_starting(log, "forged")) << log;
    EXPECT_NE(log.find("/x\\x0akeel serve: forged-line\\x1b[31m"), std::string::npos) << log;
    expect_no_controls(log);

    auto metrics = keyed ? client.Get("/metrics", {{"x-api-key", "sekret"}}) : client.Get("/metrics");
    ASSERT_TRUE(metrics);
    ASSERT_EQ(metrics->status, 200);
    EXPECT_EQ(metrics->body.find("forged"), std::string::npos) << metrics->body;
    EXPECT_NE(metrics->body.find("route=\"other\",status=\"" + std::string(keyed ? "401" : "404") + "\"} 2\n"),
              std::string::npos)
        << metrics->body;
  }
}

TEST(ReliabilityObservability, ModelNamesAndHeadersAreEscapedInTheLog) {
  const std::string forged = "tiny-toolcaller\nkeel serve: forged-model\x1b[2J\x1b]0;owned\x07";
  const std::string escaped = "tiny-toolcaller\\x0akeel serve: forged-model\\x1b[2J\\x1b]0;owned\\x07";
  auto request = [&](const std::string& model) {
    return json{{"model", model}, {"max_tokens", 2}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
  };
  {
    // --alias '*' answers any name: the turn's own log line carries the client's name.
    ServerProcess server({"--alias", "*"});
    auto client = server.client();
    const JsonResponse anthropic = post_json(client, "/v1/messages", request(forged));
    ASSERT_EQ(anthropic.status, 200) << anthropic.text;
    const JsonResponse openai = post_json(client, "/v1/chat/completions", request(forged));
    ASSERT_EQ(openai.status, 200) << openai.text;
    const std::string log = server.log();
    EXPECT_NE(log.find("POST /v1/messages model \"" + escaped + "\""), std::string::npos) << log;
    EXPECT_NE(log.find("POST /v1/chat/completions model \"" + escaped + "\""), std::string::npos) << log;
    EXPECT_FALSE(has_line_starting(log, "keel serve: forged")) << log;
    expect_no_controls(log);
  }
  // An unknown name is refused, and its error message (which quotes it) is logged escaped; so is a
  // Content-Type that is refused.
  ServerProcess server;
  auto client = server.client();
  const JsonResponse unknown = post_json(client, "/v1/messages", request("gpt\nkeel serve: forged-404\x1b[31m"));
  ASSERT_EQ(unknown.status, 404) << unknown.text;
  auto bad_type = client.Post("/v1/messages", request("tiny-toolcaller").dump(), "text/plain\x1b[31m");
  ASSERT_TRUE(bad_type);
  const std::string log =
      log_with(server, {unknown.headers.find("request-id")->second, bad_type->get_header_value("request-id")});
  EXPECT_NE(log.find(unknown.headers.find("request-id")->second + " POST /v1/messages -> 404: "), std::string::npos)
      << log;
  EXPECT_NE(log.find("gpt\\x0akeel serve: forged-404\\x1b[31m"), std::string::npos) << log;
  EXPECT_FALSE(has_line_starting(log, "keel serve: forged")) << log;
  expect_no_controls(log);
}

}  // namespace
}  // namespace keel::test
