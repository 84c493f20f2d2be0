// Error envelopes, non-streaming response bodies and ids, checked byte for byte.
#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "keel/api/api_error.h"
#include "keel/api/chat_result.h"

namespace {

using namespace keel::api;
using Json = nlohmann::ordered_json;

ChatResult tool_result() {
  ChatResult r;
  r.id = "msg_1";
  r.model = "tiny";
  r.blocks.push_back({OutputBlock::Kind::Thinking, "plan", "", "", nullptr});
  r.blocks.push_back({OutputBlock::Kind::Text, "Let me look.", "", "", nullptr});
  r.blocks.push_back({OutputBlock::Kind::ToolUse, "", "toolu_1", "Bash", Json::parse(R"({"command":"ls","b":1,"a":2})")});
  r.finish = FinishReason::ToolUse;
  r.usage = {10, 7, 90, 5};
  return r;
}

}  // namespace

TEST(ApiErrors, EnvelopesAndStatuses) {
  struct Case {
    ApiError error;
    int anthropic_status, openai_status;
    const char* openai_type;
    const char* openai_code;
  };
  const std::vector<Case> cases = {
      {invalid_request("messages: field required"), 400, 400, "invalid_request_error", nullptr},
      {authentication_failed("bad key"), 401, 401, "invalid_request_error", "invalid_api_key"},
      {ApiError(403, "permission_error", "no"), 403, 403, "invalid_request_error", nullptr},
      {not_found("model \"x\" not found"), 404, 404, "invalid_request_error", nullptr},
      {request_too_large("body over 1 MiB"), 413, 413, "invalid_request_error", nullptr},
      {ApiError(429, "rate_limit_error", "slow down"), 429, 429, "rate_limit_error", "rate_limit_exceeded"},
      {internal_error("boom"), 500, 500, "server_error", nullptr},
      {overloaded("queue full"), 529, 503, "server_error", nullptr},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(error_status(Protocol::Anthropic, c.error), c.anthropic_status);
    EXPECT_EQ(error_status(Protocol::OpenAI, c.error), c.openai_status);
    Json expected_anthropic = {{"type", "error"}, {"error", {{"type", c.error.type}, {"message", c.error.what()}}}};
    EXPECT_EQ(error_body(Protocol::Anthropic, c.error), expected_anthropic.dump());
    Json code = c.openai_code ? Json(c.openai_code) : Json(nullptr);
    Json expected_openai = {{"error", {{"message", c.error.what()}, {"type", c.openai_type}, {"param", nullptr}, {"code", code}}}};
    EXPECT_EQ(error_body(Protocol::OpenAI, c.error), expected_openai.dump());
  }
  EXPECT_EQ(overloaded("x").type, "overloaded_error");
  EXPECT_EQ(not_found("x").type, "not_found_error");
  EXPECT_EQ(request_too_large("x").type, "request_too_large");
  EXPECT_EQ(authentication_failed("x").type, "authentication_error");
  EXPECT_EQ(internal_error("x").type, "api_error");
  // ApiError is a keel::Error, so generic edges still catch it.
  try {
    throw invalid_request("x");
  } catch (const keel::Error& e) {
    EXPECT_STREQ(e.what(), "x");
  }
}

TEST(ApiResponse, AnthropicBody) {
  EXPECT_EQ(anthropic_response_body(tool_result()),
            R"({"id":"msg_1","type":"message","role":"assistant","model":"tiny","content":[)"
            R"({"type":"thinking","thinking":"plan","signature":""},)"
            R"({"type":"text","text":"Let me look."},)"
            R"({"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls","b":1,"a":2}}],)"
            R"("stop_reason":"tool_use","stop_sequence":null,)"
            R"("usage":{"input_tokens":10,"cache_creation_input_tokens":5,"cache_read_input_tokens":90,"output_tokens":7}})");
}

TEST(ApiResponse, AnthropicStopSequenceAndMaxTokens) {
  ChatResult r;
  r.id = "msg_2";
  r.model = "m";
  r.blocks.push_back({OutputBlock::Kind::Text, "done", "", "", nullptr});
  r.finish = FinishReason::StopSequence;
  r.stop_sequence = "END";
  Json body = Json::parse(anthropic_response_body(r));
  EXPECT_EQ(body["stop_reason"], "stop_sequence");
  EXPECT_EQ(body["stop_sequence"], "END");
  r.finish = FinishReason::MaxTokens;
  body = Json::parse(anthropic_response_body(r));
  EXPECT_EQ(body["stop_reason"], "max_tokens");
  EXPECT_TRUE(body["stop_sequence"].is_null());
  r.finish = FinishReason::EndTurn;
  EXPECT_EQ(Json::parse(anthropic_response_body(r))["stop_reason"], "end_turn");
}

TEST(ApiResponse, OpenAIBody) {
  ChatResult r = tool_result();
  r.id = "chatcmpl-1";
  EXPECT_EQ(openai_response_body({&r, 1}, 1700000000),
            R"({"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"tiny","choices":[{"index":0,)"
            R"("message":{"role":"assistant","content":"Let me look.","reasoning_content":"plan","tool_calls":[)"
            R"({"id":"toolu_1","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"ls\",\"b\":1,\"a\":2}"}}]},)"
            R"("logprobs":null,"finish_reason":"tool_calls"}],)"
            R"("usage":{"prompt_tokens":105,"completion_tokens":7,"total_tokens":112,"prompt_tokens_details":{"cached_tokens":90}}})");
}

TEST(ApiResponse, OpenAIContentIsNullOnlyForPureToolCalls) {
  ChatResult r;
  r.id = "c";
  r.model = "m";
  r.blocks.push_back({OutputBlock::Kind::ToolUse, "", "call_1", "f", Json::object()});
  r.finish = FinishReason::ToolUse;
  Json message = Json::parse(openai_response_body({&r, 1}, 0))["choices"][0]["message"];
  EXPECT_TRUE(message["content"].is_null());
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], "{}");
  EXPECT_FALSE(message.contains("reasoning_content"));

  r.blocks.clear();
  r.finish = FinishReason::MaxTokens;
  Json body = Json::parse(openai_response_body({&r, 1}, 0));
  EXPECT_EQ(body["choices"][0]["message"]["content"], "");
  EXPECT_FALSE(body["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");

  r.blocks.push_back({OutputBlock::Kind::Text, "a", "", "", nullptr});
  r.blocks.push_back({OutputBlock::Kind::Text, "b", "", "", nullptr});
  r.finish = FinishReason::StopSequence;
  body = Json::parse(openai_response_body({&r, 1}, 0));
  EXPECT_EQ(body["choices"][0]["message"]["content"], "ab");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
}

TEST(ApiResponse, InvalidUtf8FromTheModelIsReplacedNotThrown) {
  ChatResult r;
  r.id = "m";
  r.model = "m";
  r.blocks.push_back({OutputBlock::Kind::Text, "ok \xE2\x82", "", "", nullptr});
  EXPECT_EQ(Json::parse(anthropic_response_body(r))["content"][0]["text"], "ok \xEF\xBF\xBD");
}

TEST(ApiIds, PrefixesLengthsAndUniqueness) {
  std::set<std::string> seen;
  for (int i = 0; i < 200; ++i) {
    std::string a = new_message_id(Protocol::Anthropic);
    std::string o = new_message_id(Protocol::OpenAI);
    std::string t = new_tool_call_id(Protocol::Anthropic);
    std::string c = new_tool_call_id(Protocol::OpenAI);
    EXPECT_EQ(a.rfind("msg_", 0), 0u);
    EXPECT_EQ(o.rfind("chatcmpl-", 0), 0u);
    EXPECT_EQ(t.rfind("toolu_", 0), 0u);
    EXPECT_EQ(c.rfind("call_", 0), 0u);
    EXPECT_EQ(a.size(), 4u + 24u);
    EXPECT_EQ(t.size(), 6u + 24u);
    for (const auto& id : {a, o, t, c}) EXPECT_TRUE(seen.insert(id).second) << id;
  }
}
