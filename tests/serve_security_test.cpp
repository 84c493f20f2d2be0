// The rules that keep a server on localhost out of reach of web pages (docs/serve.md, "Security
// model"): Host names (DNS rebinding), Origins (cross-site requests), JSON-only POST bodies, CORS
// preflights, no absolute paths for callers without the key, and the key compared in constant time.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

#include "keel/api/http_access.h"
#include "keel/util/error.h"
#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;
using api::AccessOptions;
using api::AccessRules;

json hello(const std::string& model = "tiny-toolcaller") {
  return {{"model", model}, {"max_tokens", 2}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
}

// A request as a client sends it; `headers` may replace Host.
httplib::Result post(httplib::Client& client, const std::string& path, const std::string& body,
                     const std::string& content_type, const httplib::Headers& headers = {}) {
  return client.Post(path, headers, body, content_type);
}

void expect_anthropic_error(const httplib::Result& res, int status, const std::string& type) {
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, status) << res->body;
  const json body = json::parse(res->body, nullptr, false);
  ASSERT_TRUE(body.is_object()) << res->body;
  EXPECT_EQ(body["type"], "error") << res->body;
  EXPECT_EQ(body["error"]["type"], type) << res->body;
  EXPECT_TRUE(body["error"]["message"].is_string()) << res->body;
}

void expect_openai_error(const httplib::Result& res, int status) {
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, status) << res->body;
  const json body = json::parse(res->body, nullptr, false);
  ASSERT_TRUE(body.is_object()) << res->body;
  EXPECT_FALSE(body.contains("type")) << res->body;
  EXPECT_EQ(body["error"]["type"], "invalid_request_error") << res->body;
  EXPECT_TRUE(body["error"]["message"].is_string()) << res->body;
  EXPECT_TRUE(body["error"].contains("code")) << res->body;
}

// The value of an unlabelled counter or gauge on /metrics.
double metric(httplib::Client& client, const std::string& name) {
  auto res = client.Get("/metrics");
  if (!res) throw std::runtime_error("no /metrics");
  const std::string& text = res->body;
  const size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) throw std::runtime_error(name + " not on /metrics:\n" + text);
  return std::stod(text.substr(at + name.size() + 2));
}

// --- The rules as functions -------------------------------------------------------------------

TEST(ServeSecurityRules, HostHeaderParsing) {
  EXPECT_EQ(api::host_of("LocalHost:4000"), "localhost");
  EXPECT_EQ(api::host_of("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(api::host_of("[::1]:4000"), "::1");
  EXPECT_EQ(api::host_of("[::1]"), "::1");
  EXPECT_EQ(api::host_of("example.com:"), "example.com");
  EXPECT_FALSE(api::host_of(""));
  EXPECT_FALSE(api::host_of("::1"));             // IPv6 needs brackets
  EXPECT_FALSE(api::host_of("[evil.example]"));  // brackets hold IPv6 only
  EXPECT_FALSE(api::host_of("a.example:80x"));
  EXPECT_FALSE(api::host_of("user@127.0.0.1"));
  EXPECT_FALSE(api::host_of("127.0.0.1/x"));
}

TEST(ServeSecurityRules, LoopbackNames) {
  for (const char* host : {"localhost", "app.localhost", "127.0.0.1", "127.255.0.9", "::1", "::ffff:127.0.0.1"})
    EXPECT_TRUE(api::is_loopback_host(host)) << host;
  for (const char* host : {"evil.example", "localhost.evil.example", "localhostx", ".localhost", "128.0.0.1",
                           "10.0.0.1", "0.0.0.0", "::", "::2", "127.1"})
    EXPECT_FALSE(api::is_loopback_host(host)) << host;
}

TEST(ServeSecurityRules, OriginsAreNormalizedAsBrowsersSendThem) {
  EXPECT_EQ(api::normalize_origin("HTTP://App.Example:3000/"), "http://app.example:3000");
  EXPECT_EQ(api::normalize_origin("http://app.example:80"), "http://app.example");
  EXPECT_EQ(api::normalize_origin("https://app.example:443"), "https://app.example");
  EXPECT_EQ(api::normalize_origin("https://app.example:80"), "https://app.example:80");
  EXPECT_EQ(api::normalize_origin("null"), "null");
  EXPECT_FALSE(api::normalize_origin("app.example:3000"));
  EXPECT_FALSE(api::normalize_origin("http://app.example/path"));
  EXPECT_FALSE(api::normalize_origin("http://"));
}

TEST(ServeSecurityRules, JsonMediaType) {
  EXPECT_TRUE(api::is_json_media_type("application/json"));
  EXPECT_TRUE(api::is_json_media_type("Application/JSON; charset=utf-8"));
  EXPECT_TRUE(api::is_json_media_type(" application/json ;charset=UTF-8"));
  for (const char* type : {"", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                           "application/jsonx", "application/json-patch+json", "text/json"})
    EXPECT_FALSE(api::is_json_media_type(type)) << type;
}

TEST(ServeSecurityRules, ConstantTimeEqualIsEquality) {
  EXPECT_TRUE(api::constant_time_equal("sekret", "sekret"));
  EXPECT_TRUE(api::constant_time_equal("", ""));
  EXPECT_FALSE(api::constant_time_equal("sekret", "sekre"));
  EXPECT_FALSE(api::constant_time_equal("sekre", "sekret"));
  EXPECT_FALSE(api::constant_time_equal(std::string("sekret\0", 7), "sekret"));
  EXPECT_FALSE(api::constant_time_equal("Sekret", "sekret"));
  EXPECT_FALSE(api::constant_time_equal("", "sekret"));
  EXPECT_FALSE(api::constant_time_equal("sekreu", "sekret"));
}

TEST(ServeSecurityRules, HostsAndOriginsAllowedByOptions) {
  const AccessRules loopback(AccessOptions{"127.0.0.1", {}, {}, {}});
  EXPECT_TRUE(loopback.host_allowed("localhost:4000"));
  EXPECT_TRUE(loopback.host_allowed("[::1]:4000"));
  EXPECT_FALSE(loopback.host_allowed("evil.example:4000"));
  EXPECT_FALSE(loopback.host_allowed("192.168.1.5:4000"));
  EXPECT_FALSE(loopback.origin_allowed("http://localhost:4000"));  // an Origin is never implied
  EXPECT_FALSE(loopback.origin_allowed("null"));

  const AccessRules bound(AccessOptions{"192.168.1.5", {"keel.lan:4000"}, {"http://localhost:3000"}, {}});
  EXPECT_TRUE(bound.host_allowed("192.168.1.5:4000"));
  EXPECT_TRUE(bound.host_allowed("192.168.1.5"));
  EXPECT_TRUE(bound.host_allowed("KEEL.lan"));
  EXPECT_FALSE(bound.host_allowed("192.168.1.6"));
  EXPECT_TRUE(bound.origin_allowed("http://localhost:3000"));
  EXPECT_TRUE(bound.origin_allowed("http://LOCALHOST:3000/"));
  EXPECT_FALSE(bound.origin_allowed("http://localhost:3001"));
  EXPECT_FALSE(bound.origin_allowed("https://localhost:3000"));

  const AccessRules wildcard_bind(AccessOptions{"0.0.0.0", {}, {}, {}});
  EXPECT_FALSE(wildcard_bind.host_allowed("0.0.0.0:4000"));
  EXPECT_TRUE(wildcard_bind.host_allowed("127.0.0.1:4000"));

  const AccessRules open(AccessOptions{"127.0.0.1", {"*"}, {"*"}, {}});
  EXPECT_TRUE(open.host_allowed("evil.example"));
  EXPECT_TRUE(open.origin_allowed("http://evil.example"));

  EXPECT_THROW(AccessRules(AccessOptions{"127.0.0.1", {}, {"localhost:3000"}, {}}), Error);
  EXPECT_THROW(AccessRules(AccessOptions{"127.0.0.1", {"http://keel.lan"}, {}, {}}), Error);
}

// --- The rules on a running server --------------------------------------------------------------

TEST(ServeSecurity, ForeignHostIsRefusedOnEveryRoute) {
  ServerProcess server;
  auto client = server.client();
  const httplib::Headers evil = {{"Host", "evil.example:" + std::to_string(server.port())}};
  auto health = client.Get("/health", evil);
  expect_anthropic_error(health, 403, "permission_error");
  EXPECT_EQ(health->body.find(tiny_toolcaller_dir().string()), std::string::npos);
  EXPECT_NE(json::parse(health->body)["error"]["message"].get<std::string>().find("--allow-host evil.example"),
            std::string::npos);
  expect_anthropic_error(client.Get("/v1/models", evil), 403, "permission_error");
  expect_anthropic_error(client.Get("/metrics", evil), 403, "permission_error");
  expect_anthropic_error(client.Get("/no/such/route", evil), 403, "permission_error");
  expect_anthropic_error(post(client, "/v1/messages", hello().dump(), "application/json", evil), 403,
                         "permission_error");
  expect_openai_error(post(client, "/v1/chat/completions", hello().dump(), "application/json", evil), 403);
  // A name without its port, and one that merely starts like a loopback name.
  expect_anthropic_error(client.Get("/health", {{"Host", "evil.example"}}), 403, "permission_error");
  expect_anthropic_error(client.Get("/health", {{"Host", "localhost.evil.example"}}), 403, "permission_error");
  EXPECT_EQ(metric(client, "keel_generations_total"), 0);
}

TEST(ServeSecurity, LoopbackNamesAndTheBoundAddressAreAnswered) {
  ServerProcess server;
  auto client = server.client();
  const std::string port = std::to_string(server.port());
  for (const std::string& host : std::vector<std::string>{"localhost", "localhost:" + port, "LOCALHOST:" + port, "app.localhost:" + port,
                                 "127.0.0.1", "127.0.0.1:" + port, "127.3.2.1:" + port, "[::1]:" + port, "[::1]"}) {
    auto res = client.Get("/health", {{"Host", host}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << host << ": " << res->body;
  }
}

TEST(ServeSecurity, AllowHostAcceptsMoreNames) {
  ServerProcess server({"--allow-host", "keel.lan", "--allow-host", "gpu-box:4000"});
  auto client = server.client();
  EXPECT_NE(server.log().find("--allow-host"), std::string::npos) << server.log();
  for (const std::string& host :
       std::vector<std::string>{"keel.lan", "keel.lan:" + std::to_string(server.port()), "KEEL.LAN", "gpu-box:1"}) {
    auto res = client.Get("/health", {{"Host", host}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << host;
  }
  expect_anthropic_error(client.Get("/health", {{"Host", "other.lan"}}), 403, "permission_error");

  // The environment form takes a comma-separated list.
  setenv("KEEL_ALLOW_HOST", "a.lan, b.lan", 1);
  ServerProcess from_env;
  unsetenv("KEEL_ALLOW_HOST");
  auto env_client = from_env.client();
  for (const char* host : {"a.lan", "b.lan"}) EXPECT_EQ(env_client.Get("/health", {{"Host", host}})->status, 200) << host;
  EXPECT_EQ(env_client.Get("/health", {{"Host", "c.lan"}})->status, 403);

  ServerProcess any({"--allow-host", "*"});
  EXPECT_NE(any.log().find("warning: --allow-host '*'"), std::string::npos) << any.log();
  EXPECT_EQ(any.client().Get("/health", {{"Host", "evil.example"}})->status, 200);
}

TEST(ServeSecurity, BadAllowValuesAreRefusedAtStart) {
  const CommandResult origin = run_command(keel_binary().string() + " serve --model " + tiny_toolcaller_dir().string() +
                                           " --port 0 --allow-origin localhost:3000");
  EXPECT_EQ(origin.exit_code, 1) << origin.output;
  EXPECT_NE(origin.output.find("scheme://host[:port]"), std::string::npos) << origin.output;
  const CommandResult host = run_command(keel_binary().string() + " serve --model " + tiny_toolcaller_dir().string() +
                                         " --port 0 --allow-host http://keel.lan");
  EXPECT_EQ(host.exit_code, 1) << host.output;
  EXPECT_NE(host.output.find("--allow-host"), std::string::npos) << host.output;
}

// HTTP/1.0 has no Host header and no browser sends such a request: it is answered. HTTP/1.1
// requires Host, so its absence is a 400.
TEST(ServeSecurity, RequestWithoutHost) {
  ServerProcess server;
  const RawResponse old = raw_request(server.port(), "GET /health HTTP/1.0\r\n\r\n");
  EXPECT_EQ(old.status, 200) << old.body;
  EXPECT_EQ(json::parse(old.body)["status"], "ok");
  const RawResponse no_host = raw_request(server.port(), "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(no_host.status, 400) << no_host.body;
  EXPECT_EQ(json::parse(no_host.body)["error"]["type"], "invalid_request_error") << no_host.body;
  const RawResponse two_hosts = raw_request(
      server.port(), "GET /health HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(two_hosts.status, 400) << two_hosts.body;
  // HTTP/1.0 with a foreign Host is still refused.
  const RawResponse old_evil = raw_request(server.port(), "GET /health HTTP/1.0\r\nHost: evil.example\r\n\r\n");
  EXPECT_EQ(old_evil.status, 403) << old_evil.body;
}

// The access rules look at the head alone: a refused upload is answered before its body is
// sent, so no page or keyless client can make keel receive and hold a body it refuses.
TEST(ServeSecurity, RefusedBeforeTheBodyIsRead) {
  ServerProcess server({"--api-key", "sekrit"});
  const std::string head = "POST /v1/messages HTTP/1.1\r\nContent-Length: 10000000\r\nConnection: close\r\n";
  const struct {
    std::string headers;
    int status;
  } cases[] = {
      {"Host: evil.example\r\nContent-Type: application/json\r\nx-api-key: sekrit\r\n", 403},
      {"Host: localhost\r\nOrigin: https://evil.example\r\nContent-Type: application/json\r\nx-api-key: sekrit\r\n", 403},
      {"Host: localhost\r\nContent-Type: application/json\r\n", 401},
      {"Host: localhost\r\nContent-Type: text/plain\r\nx-api-key: sekrit\r\n", 415},
  };
  for (const auto& c : cases) {
    const auto start = std::chrono::steady_clock::now();
    const RawResponse r = raw_request(server.port(), head + c.headers + "\r\n");
    EXPECT_EQ(r.status, c.status) << c.headers << r.body;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << "it waited for the body";
  }
}

// What a web page can send without a preflight: a text/plain POST. It must never reach the model.
TEST(ServeSecurity, CrossSiteRequestsAreRefused) {
  ServerProcess server;
  auto client = server.client();
  const httplib::Headers evil = {{"Origin", "http://evil.example"}};
  auto simple = post(client, "/v1/messages", hello().dump(), "text/plain", evil);
  expect_anthropic_error(simple, 403, "permission_error");
  EXPECT_FALSE(simple->has_header("Access-Control-Allow-Origin"));
  expect_anthropic_error(post(client, "/v1/messages", hello().dump(), "application/json", evil), 403,
                         "permission_error");
  expect_openai_error(post(client, "/v1/chat/completions", hello().dump(), "text/plain", evil), 403);
  expect_anthropic_error(post(client, "/v1/messages/count_tokens", hello().dump(), "text/plain", evil), 403,
                         "permission_error");
  expect_anthropic_error(client.Get("/health", evil), 403, "permission_error");
  expect_anthropic_error(client.Get("/v1/models", {{"Origin", "null"}}), 403, "permission_error");
  // Even a page on localhost itself (another port, another app) needs --allow-origin.
  expect_anthropic_error(
      client.Get("/health", {{"Origin", "http://localhost:" + std::to_string(server.port())}}), 403,
      "permission_error");
  auto preflight = client.Options("/v1/messages", {{"Origin", "http://evil.example"},
                                                   {"Access-Control-Request-Method", "POST"},
                                                   {"Access-Control-Request-Headers", "content-type"}});
  expect_anthropic_error(preflight, 403, "permission_error");
  EXPECT_FALSE(preflight->has_header("Access-Control-Allow-Origin"));
  EXPECT_EQ(metric(client, "keel_generations_total"), 0);
  EXPECT_TRUE(server.running());
}

TEST(ServeSecurity, AllowedOriginGetsCors) {
  ServerProcess server({"--allow-origin", "http://app.example:3000"});
  auto client = server.client();
  const httplib::Headers app = {{"Origin", "http://app.example:3000"}};

  auto preflight = client.Options("/v1/messages", {{"Origin", "http://app.example:3000"},
                                                   {"Access-Control-Request-Method", "POST"},
                                                   {"Access-Control-Request-Headers", "content-type, x-api-key, x-stainless-os"}});
  ASSERT_TRUE(preflight);
  EXPECT_EQ(preflight->status, 204);
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Origin"), "http://app.example:3000");
  const std::string methods = preflight->get_header_value("Access-Control-Allow-Methods");
  EXPECT_NE(methods.find("POST"), std::string::npos) << methods;
  EXPECT_NE(methods.find("GET"), std::string::npos) << methods;
  const std::string allowed = preflight->get_header_value("Access-Control-Allow-Headers");
  for (const char* h : {"x-api-key", "authorization", "content-type", "anthropic-version", "anthropic-beta", "x-stainless-os"})
    EXPECT_NE(allowed.find(h), std::string::npos) << h << " not in " << allowed;
  EXPECT_EQ(preflight->get_header_value("Access-Control-Max-Age"), "600");

  auto answer = post(client, "/v1/messages", hello().dump(), "application/json", app);
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 200) << answer->body;
  EXPECT_EQ(answer->get_header_value("Access-Control-Allow-Origin"), "http://app.example:3000");
  EXPECT_NE(answer->get_header_value("Access-Control-Expose-Headers").find("request-id"), std::string::npos);
  // Errors carry it too, so the page can read them.
  auto error = post(client, "/v1/messages", "{not json", "application/json", app);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->status, 400);
  EXPECT_EQ(error->get_header_value("Access-Control-Allow-Origin"), "http://app.example:3000");
  // The allowed origin still sends JSON: text/plain is refused, by content type.
  expect_anthropic_error(post(client, "/v1/messages", hello().dump(), "text/plain", app), 415, "invalid_request_error");
  // Other origins are still refused.
  expect_anthropic_error(client.Get("/health", {{"Origin", "http://app.example:3001"}}), 403, "permission_error");
  // OPTIONS without an Origin is not a preflight: just the methods.
  auto plain = client.Options("/v1/messages");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->status, 204);
  EXPECT_EQ(plain->get_header_value("Allow"), "GET, POST, OPTIONS");
  EXPECT_FALSE(plain->has_header("Access-Control-Allow-Origin"));
}

TEST(ServeSecurity, AnyOriginIsAWarning) {
  ServerProcess server({"--allow-origin", "*"});
  EXPECT_NE(server.log().find("warning: --allow-origin '*'"), std::string::npos) << server.log();
  auto client = server.client();
  auto res = client.Get("/health", {{"Origin", "http://anything.example"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Access-Control-Allow-Origin"), "http://anything.example");
}

TEST(ServeSecurity, PostBodiesMustBeDeclaredJson) {
  ServerProcess server;
  auto client = server.client();
  const std::string body = hello().dump();
  expect_anthropic_error(post(client, "/v1/messages", body, "text/plain"), 415, "invalid_request_error");
  expect_anthropic_error(post(client, "/v1/messages", body, "application/x-www-form-urlencoded"), 415,
                         "invalid_request_error");
  expect_anthropic_error(post(client, "/v1/messages/count_tokens", body, "text/plain"), 415, "invalid_request_error");
  expect_openai_error(post(client, "/v1/chat/completions", body, "text/plain"), 415);
  // No Content-Type at all.
  const RawResponse untyped = raw_request(
      server.port(), "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n" + body);
  EXPECT_EQ(untyped.status, 415) << untyped.body;
  EXPECT_EQ(json::parse(untyped.body)["error"]["type"], "invalid_request_error");

  // Multipart, well-formed or not: an envelope saying what is wrong, never a bare "HTTP 400".
  httplib::MultipartFormDataItems form = {{"file", body, "request.json", "application/json"}};
  auto multipart = client.Post("/v1/messages", form);
  expect_anthropic_error(multipart, 415, "invalid_request_error");
  EXPECT_NE(multipart->body.find("application/json"), std::string::npos) << multipart->body;
  auto broken = post(client, "/v1/chat/completions", "--x\r\nnot a part", "multipart/form-data; boundary=x");
  expect_openai_error(broken, 415);
  EXPECT_EQ(broken->body.find("HTTP 400"), std::string::npos) << broken->body;

  // Parameters and case are fine.
  auto charset = post(client, "/v1/messages", body, "application/json; charset=utf-8");
  ASSERT_TRUE(charset);
  EXPECT_EQ(charset->status, 200) << charset->body;
  auto upper = post(client, "/v1/messages/count_tokens", body, "Application/JSON");
  ASSERT_TRUE(upper);
  EXPECT_EQ(upper->status, 200) << upper->body;
  // GET routes take no body and need no Content-Type.
  EXPECT_EQ(client.Get("/v1/models")->status, 200);
}

TEST(ServeSecurity, ModelPathOnlyForKeyHolders) {
  const std::string full = std::filesystem::canonical(tiny_toolcaller_dir()).string();
  {
    ServerProcess server;
    auto client = server.client();
    auto health = client.Get("/health");
    ASSERT_TRUE(health);
    EXPECT_EQ(health->body.find(full), std::string::npos) << health->body;
    const json h = json::parse(health->body);
    EXPECT_FALSE(h.contains("path"));
    EXPECT_EQ(h["model"], "tiny-toolcaller");
    EXPECT_EQ(health->get_header_value("x-keel-model"), "tiny-toolcaller");
    auto error = client.Get("/nothing");
    ASSERT_TRUE(error);
    EXPECT_EQ(error->get_header_value("x-keel-model"), "tiny-toolcaller");
    EXPECT_EQ(error->body.find(full), std::string::npos);
  }
  ServerProcess server({"--api-key", "sekret"});
  auto client = server.client();
  auto anonymous = client.Get("/health");
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->status, 200);
  EXPECT_EQ(anonymous->body.find(full), std::string::npos) << anonymous->body;
  EXPECT_EQ(anonymous->get_header_value("x-keel-model"), "tiny-toolcaller");
  auto wrong = client.Get("/health", {{"x-api-key", "sekre"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->get_header_value("x-keel-model"), "tiny-toolcaller");
  EXPECT_FALSE(json::parse(wrong->body).contains("path"));
  auto holder = client.Get("/health", {{"x-api-key", "sekret"}});
  ASSERT_TRUE(holder);
  EXPECT_EQ(json::parse(holder->body)["path"], full);
  EXPECT_EQ(holder->get_header_value("x-keel-model"), full);
  auto bearer = client.Get("/v1/models", {{"Authorization", "Bearer sekret"}});
  ASSERT_TRUE(bearer);
  EXPECT_EQ(bearer->status, 200);
  EXPECT_EQ(bearer->get_header_value("x-keel-model"), full);
}

TEST(ServeSecurity, ApiKeyMustMatchExactly) {
  ServerProcess server({"--api-key", "sekret"});
  auto client = server.client();
  for (const std::string key : {"", "s", "sekre", "sekrets", "Sekret", "sekreu"}) {
    auto res = client.Get("/v1/models", {{"x-api-key", key}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 401) << "'" << key << "'";
    EXPECT_EQ(client.Get("/v1/models", {{"Authorization", "Bearer " + key}})->status, 401) << "'" << key << "'";
  }
  EXPECT_EQ(client.Get("/v1/models", {{"Authorization", "sekret"}})->status, 401);
  EXPECT_EQ(client.Get("/v1/models", {{"x-api-key", "sekret"}})->status, 200);
  EXPECT_EQ(client.Get("/v1/models", {{"Authorization", "bearer sekret"}})->status, 200);
  // The key is checked before the content type: an unauthenticated caller learns nothing else.
  expect_anthropic_error(post(client, "/v1/messages", hello().dump(), "text/plain"), 401, "authentication_error");
  // Preflights carry no credentials, and do not need them.
  EXPECT_EQ(client.Options("/v1/messages")->status, 204);
}

// A balancer's probes need no key; what the prefix cache holds (hashes of key holders' prompts)
// does, as every API route.
TEST(ServeSecurity, ProbesAreOpenAndTheCacheSignalNeedsTheKey) {
  ServerProcess server({"--api-key", "sekret"});
  auto client = server.client();
  auto live = client.Get("/live");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);
  EXPECT_EQ(json::parse(live->body)["status"], "ok");
  auto health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  const std::string instance = json::parse(health->body)["instance"];
  EXPECT_EQ(instance.rfind("keel_", 0), 0u);
  for (const char* path : {"/kv/blocks", "/kv/events?after=0"}) {
    EXPECT_EQ(client.Get(path)->status, 401) << path;
    auto held = client.Get(path, {{"x-api-key", "sekret"}});
    ASSERT_TRUE(held);
    EXPECT_EQ(held->status, 200) << path;
    EXPECT_EQ(json::parse(held->body)["instance"], instance);
  }
  const std::string body = hello().dump();
  EXPECT_EQ(client.Post("/kv/prefix/v1/messages", body, "application/json")->status, 401);
  auto prefix = client.Post("/kv/prefix/v1/messages", {{"x-api-key", "sekret"}}, body, "application/json");
  ASSERT_TRUE(prefix);
  EXPECT_EQ(prefix->status, 200) << prefix->body;
  EXPECT_EQ(json::parse(prefix->body)["instance"], instance);
}

}  // namespace
}  // namespace keel::test
