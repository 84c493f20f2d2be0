// Invariant 6: a call that does not fit its tool's schema never reaches the client as a call.
#include <gtest/gtest.h>

#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;

json first_request() {
  const json& session = session_fixture();
  return session["cases"][0]["request"];
}

json& tool_named(json& request, const std::string& name) {
  for (auto& t : request["tools"])
    if (t["name"] == name) return t;
  throw std::runtime_error("no tool " + name);
}

int64_t metric(const ServerProcess& server, const std::string& line_prefix) {
  auto client = server.client();
  const std::string text = client.Get("/metrics")->body;
  const size_t at = text.find(line_prefix + " ");
  if (at == std::string::npos) throw std::runtime_error("no metric " + line_prefix);
  return std::stoll(text.substr(at + line_prefix.size() + 1));
}

// These tests check validation after the fact, so the grammar that would keep the calls valid in
// the first place is off (--constrained-tool-calls off); the last one turns it on.

// The model answers `ls /tmp` with {"command": ...}; a schema that also requires `timeout_ms`
// makes every such call invalid.
TEST(ServeToolValidation, MissingRequiredPropertyIsNeverPassedOn) {
  ServerProcess server({"--constrained-tool-calls", "off"});
  auto client = server.client();
  json request = first_request();
  json& bash = tool_named(request, "Bash");
  bash["input_schema"]["properties"]["timeout_ms"] = {{"type", "integer"}};
  bash["input_schema"]["required"] = json::array({"command", "timeout_ms"});
  for (bool stream : {false, true}) {
    request["stream"] = stream;
    json message;
    if (stream) {
      auto res = client.Post("/v1/messages", request.dump(), "application/json");
      ASSERT_TRUE(res);
      message = replay_anthropic_stream(parse_sse(res->body));
    } else {
      const JsonResponse r = post_json(client, "/v1/messages", request);
      ASSERT_EQ(r.status, 200) << r.text;
      message = r.body;
    }
    bool explained = false;
    for (const auto& block : message["content"]) {
      if (block["type"] == "tool_use") {
        // A retry may have produced a valid call; then it carries both properties.
        EXPECT_TRUE(block["input"].contains("command") && block["input"].contains("timeout_ms")) << block.dump();
        EXPECT_TRUE(block["input"]["timeout_ms"].is_number_integer()) << block.dump();
      } else if (block["type"] == "text" && block["text"].get<std::string>().find("was invalid") != std::string::npos) {
        explained = true;
        EXPECT_NE(block["text"].get<std::string>().find("timeout_ms"), std::string::npos) << block.dump();
      }
    }
    if (message["stop_reason"] != "tool_use") {
      EXPECT_TRUE(explained) << message.dump();
    }
  }
  EXPECT_GE(metric(server, "keel_tool_calls_total{result=\"retried\"}"), 2);
  EXPECT_EQ(metric(server, "keel_tool_calls_total{result=\"valid\"}") + metric(server, "keel_tool_calls_total{result=\"invalid\"}"), 2);
}

TEST(ServeToolValidation, UnknownToolIsInvalidAndRetriesCanBeTurnedOff) {
  ServerProcess server({"--tool-retries", "0", "--constrained-tool-calls", "off"});
  auto client = server.client();
  json request = first_request();
  tool_named(request, "Bash")["name"] = "Shell";  // the model still calls "Bash"
  const JsonResponse r = post_json(client, "/v1/messages", request);
  ASSERT_EQ(r.status, 200) << r.text;
  ASSERT_EQ(r.body["content"].size(), 1u) << r.text;
  EXPECT_EQ(r.body["content"][0]["type"], "text");
  const std::string text = r.body["content"][0]["text"];
  EXPECT_NE(text.find("\"Bash\""), std::string::npos) << text;
  EXPECT_NE(text.find("unknown tool"), std::string::npos) << text;
  EXPECT_EQ(r.body["stop_reason"], "end_turn");
  EXPECT_EQ(metric(server, "keel_tool_calls_total{result=\"retried\"}"), 0);
  EXPECT_EQ(metric(server, "keel_tool_calls_total{result=\"invalid\"}"), 1);
}

TEST(ServeToolValidation, ToolChoiceNonePassesCallsThroughAsText) {
  ServerProcess server;
  auto client = server.client();
  json request = first_request();
  request["tool_choice"] = {{"type", "none"}};
  const JsonResponse r = post_json(client, "/v1/messages", request);
  ASSERT_EQ(r.status, 200) << r.text;
  for (const auto& block : r.body["content"]) EXPECT_EQ(block["type"], "text") << r.text;
}

// Asked for a file, the model calls Read; naming Glob makes keel write the call's start for it
// (toolcall::call_opener), and the model fills in a pattern. Greedy, streamed and not.
TEST(ServeToolValidation, ToolChoiceNamingAToolGetsACallToIt) {
  ServerProcess server;
  auto client = server.client();
  json request = json::parse(R"({"model": "tiny-toolcaller", "max_tokens": 100, "temperature": 0,
    "tools": [
      {"name": "Bash", "description": "Run a shell command", "input_schema": {"type": "object",
       "properties": {"command": {"type": "string"}}, "required": ["command"]}},
      {"name": "Read", "description": "Read a file", "input_schema": {"type": "object",
       "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}},
      {"name": "Glob", "description": "Find files by pattern", "input_schema": {"type": "object",
       "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}}],
    "messages": [{"role": "user", "content": "Show me what is in /etc/hosts"}]})");
  auto first_call = [&](const json& req, bool stream) {
    json message;
    if (stream) {
      json streamed = req;
      streamed["stream"] = true;
      auto res = client.Post("/v1/messages", streamed.dump(), "application/json");
      EXPECT_TRUE(res);
      message = res ? replay_anthropic_stream(parse_sse(res->body)) : json::object();
    } else {
      const JsonResponse r = post_json(client, "/v1/messages", req);
      EXPECT_EQ(r.status, 200) << r.text;
      message = r.body;
    }
    for (const auto& block : message["content"])
      if (block["type"] == "tool_use") return std::make_pair(block, message["stop_reason"]);
    ADD_FAILURE() << "no tool_use: " << message.dump();
    return std::make_pair(json::object(), json());
  };
  EXPECT_NE(first_call(request, false).first.value("name", ""), "Glob");  // so the choice is what makes it Glob
  request["tool_choice"] = {{"type", "tool"}, {"name", "Glob"}};
  for (bool stream : {false, true}) {
    const auto [call, stop] = first_call(request, stream);
    EXPECT_EQ(call.value("name", ""), "Glob") << call.dump();
    EXPECT_TRUE(call.contains("input") && call["input"].contains("pattern") && call["input"]["pattern"].is_string())
        << call.dump();
    EXPECT_EQ(stop, "tool_use");
  }
}

// With the grammar on (the default), the same model writes the required property the first time:
// the call is valid and nothing is retried.
TEST(ServeToolValidation, UnderTheGrammarTheRequiredPropertyIsWrittenAtOnce) {
  ServerProcess server;
  auto client = server.client();
  json request = first_request();
  json& bash = tool_named(request, "Bash");
  bash["input_schema"]["properties"]["timeout_ms"] = {{"type", "integer"}};
  bash["input_schema"]["required"] = json::array({"command", "timeout_ms"});
  const JsonResponse r = post_json(client, "/v1/messages", request);
  ASSERT_EQ(r.status, 200) << r.text;
  ASSERT_EQ(r.body["stop_reason"], "tool_use") << r.text;
  const json& call = r.body["content"].back();
  ASSERT_EQ(call["type"], "tool_use") << r.text;
  EXPECT_TRUE(call["input"]["command"].is_string()) << call.dump();
  EXPECT_TRUE(call["input"]["timeout_ms"].is_number_integer()) << call.dump();
  EXPECT_EQ(metric(server, "keel_tool_calls_total{result=\"retried\"}"), 0);
  EXPECT_EQ(metric(server, "keel_tool_calls_total{result=\"invalid\"}"), 0);
}

}  // namespace
}  // namespace keel::test
