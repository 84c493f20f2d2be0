// OpenAI Chat Completions request bodies -> ChatRequest: roles, content parts, tool calls kept as
// sent, sampling fields and every rejection with its field path.
#include <gtest/gtest.h>

#include <optional>

#include <nlohmann/json.hpp>

#include "keel/api/chat_request.h"

namespace {

using keel::api::ApiError;
using keel::api::ChatRequest;
using keel::api::RequestLimits;
using keel::api::ToolChoiceMode;
using Json = nlohmann::ordered_json;

ChatRequest parse(const std::string& body, const RequestLimits& limits = {}) {
  return keel::api::parse_openai_request(body, limits);
}

std::string body(const std::string& messages, const std::string& extra = "") {
  return R"({"model":"m",)" + (extra.empty() ? "" : extra + ",") + R"("messages":)" + messages + "}";
}

const std::string kTools =
    R"("tools":[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"strict":true}}])";

}  // namespace

TEST(ApiOpenAIRequest, MinimalRequestAndDefaults) {
  ChatRequest r = parse(body(R"([{"role":"user","content":"hi"}])"));
  EXPECT_EQ(r.protocol, keel::api::Protocol::OpenAI);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.max_tokens, keel::api::kDefaultOpenAIMaxTokens);
  EXPECT_EQ(r.messages.dump(), R"([{"role":"user","content":"hi"}])");
  EXPECT_TRUE(r.tools.is_null());
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_FALSE(r.thinking);
}

TEST(ApiOpenAIRequest, RolesAndContentParts) {
  std::string messages = R"([
    {"role":"developer","content":"dev rules"},
    {"role":"system","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
    {"role":"user","content":[{"type":"text","text":"hello"}],"name":"bob"}])";
  EXPECT_EQ(parse(body(messages)).messages.dump(),
            R"([{"role":"system","content":"dev rules"},{"role":"system","content":"a\nb"},{"role":"user","content":"hello"}])");
}

TEST(ApiOpenAIRequest, AssistantToolCallsKeepArgumentsAsSent) {
  std::string messages = R"([
    {"role":"user","content":"weather?"},
    {"role":"assistant","content":null,"reasoning_content":"think","tool_calls":[
      {"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\", \"unit\": \"c\"}"}},
      {"id":"call_2","type":"function","function":{"name":"get_weather","arguments":{"zeta":1,"alpha":2}}}]},
    {"role":"tool","tool_call_id":"call_1","content":"18C"},
    {"role":"tool","tool_call_id":"call_2","name":"get_weather","content":[{"type":"text","text":"20C"}]}])";
  Json m = parse(body(messages, kTools)).messages;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[1].dump(),
            R"({"role":"assistant","content":"","reasoning_content":"think","tool_calls":[)"
            R"({"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\", \"unit\": \"c\"}"}},)"
            R"({"id":"call_2","type":"function","function":{"name":"get_weather","arguments":{"zeta":1,"alpha":2}}}]})");
  EXPECT_EQ(m[2].dump(), R"({"role":"tool","tool_call_id":"call_1","content":"18C"})");
  EXPECT_EQ(m[3].dump(), R"({"role":"tool","tool_call_id":"call_2","name":"get_weather","content":"20C"})");
}

TEST(ApiOpenAIRequest, ToolsPassThroughExactlyAsSent) {
  ChatRequest r = parse(body(R"([{"role":"user","content":"x"}])", kTools));
  EXPECT_EQ(r.tools.dump(), Json::parse(std::string("{") + kTools + "}")["tools"].dump());
  EXPECT_EQ(r.tools[0]["function"]["parameters"].dump(),
            R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})");
}

TEST(ApiOpenAIRequest, ToolChoiceModes) {
  std::string msgs = R"([{"role":"user","content":"x"}])";
  EXPECT_EQ(parse(body(msgs, kTools + R"(,"tool_choice":"auto")")).tool_choice, ToolChoiceMode::Auto);
  EXPECT_EQ(parse(body(msgs, kTools + R"(,"tool_choice":"none")")).tool_choice, ToolChoiceMode::None);
  EXPECT_EQ(parse(body(msgs, kTools + R"(,"tool_choice":"required")")).tool_choice, ToolChoiceMode::Any);
  ChatRequest r = parse(body(msgs, kTools + R"(,"tool_choice":{"type":"function","function":{"name":"get_weather"}},"parallel_tool_calls":false)"));
  EXPECT_EQ(r.tool_choice, ToolChoiceMode::Tool);
  EXPECT_EQ(r.tool_choice_name, "get_weather");
  EXPECT_FALSE(r.parallel_tool_calls);
}

TEST(ApiOpenAIRequest, SamplingStopStreamUsageAndReasoning) {
  ChatRequest r = parse(body(R"([{"role":"user","content":"x"}])",
                             R"("max_completion_tokens":300,"max_tokens":5,"temperature":1.7,"top_p":0.5,"top_k":20,"seed":42,)"
                             R"("stop":["a","b"],"stream":true,"stream_options":{"include_usage":true},"reasoning_effort":"high","n":1,"user":"u")"));
  EXPECT_EQ(r.max_tokens, 300);
  EXPECT_FLOAT_EQ(r.temperature, 1.7f);
  EXPECT_FLOAT_EQ(r.top_p, 0.5f);
  EXPECT_EQ(r.top_k, 20);
  ASSERT_TRUE(r.seed.has_value());
  EXPECT_EQ(*r.seed, 42u);
  EXPECT_EQ(r.stop_sequences, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.thinking);

  ChatRequest s = parse(body(R"([{"role":"user","content":"x"}])", R"("max_tokens":7,"stop":"END","top_k":-1,"reasoning_effort":"none")"));
  EXPECT_EQ(s.max_tokens, 7);
  EXPECT_EQ(s.stop_sequences, (std::vector<std::string>{"END"}));
  EXPECT_EQ(s.top_k, 0);
  EXPECT_FALSE(s.thinking);
}

TEST(ApiOpenAIRequest, MaxTokensCap) {
  RequestLimits limits;
  limits.max_tokens_cap = 100;
  EXPECT_EQ(parse(body(R"([{"role":"user","content":"x"}])"), limits).max_tokens, 100);
  EXPECT_EQ(parse(body(R"([{"role":"user","content":"x"}])", R"("max_tokens":50)"), limits).max_tokens, 50);
}

TEST(ApiOpenAIRequest, EachMalformedRequestIsA400NamingTheField) {
  const std::string ok = R"([{"role":"user","content":"x"}])";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "request body is not valid JSON (at byte 2)"},
      {R"({"messages":[]})", "model: field required"},
      {R"({"model":"m","temperature":1e999,"messages":[]})", "request body is not valid JSON (a number is out of range)"},
      {R"({"model":"m","messages":[]})", "messages: must contain at least one message"},
      {R"({"model":"","messages":[]})", "model: must not be empty"},
      {body(R"([{"role":"function","content":"x"}])"),
       "messages.0.role: unknown role \"function\" (expected system, developer, user, assistant or tool)"},
      {body(R"([{"role":"user"}])"), "messages.0.content: field required"},
      {body(R"([{"role":"user","content":{"text":"x"}}])"), "messages.0.content: expected a string or an array of content parts, got object"},
      {body(R"([{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:"}}]}])"),
       "messages.0.content.0: image content is not supported yet"},
      {body(R"([{"role":"user","content":[{"type":"input_audio"}]}])"), "messages.0.content.0: audio content is not supported yet"},
      {body(R"([{"role":"user","content":[{"type":"video"}]}])"), "messages.0.content.0.type: unknown content part type \"video\""},
      {body(R"([{"role":"tool","content":"x"}])"), "messages.0.tool_call_id: field required"},
      {body(R"([{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"a","arguments":"{}"}}]}])"),
       "messages.0.tool_calls.0.id: field required"},
      {body(R"([{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"a"}}]}])"),
       "messages.0.tool_calls.0.function.arguments: field required"},
      {body(R"([{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"a","arguments":3}}]}])"),
       "messages.0.tool_calls.0.function.arguments: expected a JSON string or an object, got number"},
      {body(R"([{"role":"assistant","tool_calls":{}}])"), "messages.0.tool_calls: expected an array, got object"},
      {body(ok, R"("tools":[{"type":"retrieval"}])"), "tools.0.type: tool type \"retrieval\" is not supported (expected \"function\")"},
      {body(ok, R"("tools":[{"type":"function"}])"), "tools.0.function: field required"},
      {body(ok, R"("tools":[{"type":"function","function":{"parameters":{}}}])"), "tools.0.function.name: field required"},
      {body(ok, R"("tools":[{"type":"function","function":{"name":"a","parameters":[]}}])"),
       "tools.0.function.parameters: expected an object, got array"},
      {body(ok, R"("tool_choice":"always")"), "tool_choice: unknown tool_choice \"always\" (expected auto, none or required)"},
      {body(ok, kTools + R"(,"tool_choice":{"type":"function","function":{"name":"nope"}})"), "tool_choice: no tool named \"nope\" in tools"},
      {body(ok, R"("tool_choice":"required")"), "tool_choice: requires tools, and the request has none"},
      {body(ok, R"("temperature":2.5)"), "temperature: must be between 0 and 2, got 2.5"},
      {body(ok, R"("max_tokens":-3)"), "max_tokens: must be at least 1, got -3"},
      {body(ok, R"("max_completion_tokens":"many")"), "max_completion_tokens: expected an integer, got string"},
      {body(ok, R"("n":17)"), "n: expected an integer from 1 to 16"},
      {body(ok, R"("n":2,"stream":true)"), "n: n > 1 is answered without streaming only; set stream to false"},
      {body(ok, R"("top_logprobs":21,"logprobs":true)"), "top_logprobs: expected an integer from 0 to 20"},
      {body(ok, R"("top_logprobs":2)"), "top_logprobs: needs logprobs: true"},
      {body(ok, R"("repetition_penalty":0)"), "repetition_penalty: expected a number above 0 and at most 10 (1 is off)"},
      {body(ok, R"("stop":[""])"), "stop.0: must not be empty"},
      {body(ok, R"("stop":5)"), "stop: expected a string or an array of strings, got number"},
      {body(ok, R"("stream_options":true)"), "stream_options: expected an object, got boolean"},
      {body(ok, R"("seed":"x")"), "seed: expected an integer, got string"},
  };
  for (const auto& [b, message] : cases) {
    try {
      parse(b);
      ADD_FAILURE() << "accepted: " << b;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400) << b;
      EXPECT_EQ(e.type, "invalid_request_error") << b;
      EXPECT_EQ(std::string(e.what()), message) << b;
    }
  }
}

TEST(ApiOpenAIRequest, DeepNestingIsRejectedBeforeParsing) {
  std::string bomb = R"({"model":"m","messages":[{"role":"user","content":"x"}],"x":)" + std::string(100000, '{');
  try {
    parse(bomb);
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_STREQ(e.what(), "request body nests arrays/objects deeper than 64 levels");
  }
}


TEST(ApiOpenAIRequest, ReasoningEffortMapsToADocumentedBudget) {
  const std::string msgs = R"([{"role":"user","content":"x"}])";
  const std::vector<std::pair<std::string, std::optional<int64_t>>> table = {
      {"minimal", 512}, {"low", 2048}, {"medium", 8192}, {"high", 24576}};
  for (const auto& [effort, budget] : table) {
    ChatRequest r = parse(body(msgs, R"("reasoning_effort":")" + effort + "\""));
    EXPECT_TRUE(r.thinking) << effort;
    EXPECT_EQ(r.reasoning_budget, budget) << effort;
  }
  ChatRequest none = parse(body(msgs, R"("reasoning_effort":"none")"));
  EXPECT_FALSE(none.thinking);
  EXPECT_FALSE(none.reasoning_budget.has_value());
}

TEST(ApiOpenAIRequest, LogprobsChoicesAndRepetitionPenaltyAreRead) {
  const std::string msgs = R"([{"role":"user","content":"x"}])";
  EXPECT_FALSE(parse(body(msgs, R"("logprobs":false)")).top_logprobs.has_value());
  EXPECT_EQ(parse(body(msgs, R"("logprobs":true)")).top_logprobs, 0);
  EXPECT_EQ(parse(body(msgs, R"("logprobs":true,"top_logprobs":20)")).top_logprobs, 20);
  EXPECT_EQ(parse(body(msgs, R"("n":3)")).n, 3);
  EXPECT_EQ(parse(body(msgs, "")).n, 1);
  EXPECT_FLOAT_EQ(parse(body(msgs, R"("repetition_penalty":1.3)")).repetition_penalty, 1.3f);
}

// response_format compiles to the answer's grammar; what the grammar cannot honour exactly is a
// 400 naming the keyword's place, and a malformed format names the field.
TEST(ApiOpenAIRequest, ResponseFormatsBecomeTheAnswersGrammar) {
  const std::string msgs = R"([{"role":"user","content":"x"}])";
  EXPECT_EQ(parse(body(msgs, R"("response_format":{"type":"text"})")).answer_grammar, nullptr);
  EXPECT_NE(parse(body(msgs, R"("response_format":{"type":"json_object"})")).answer_grammar, nullptr);
  EXPECT_NE(parse(body(msgs, R"("response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,
      "schema":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}}})"))
                .answer_grammar,
            nullptr);
  auto refused = [&](const std::string& extra) -> std::string {
    try {
      parse(body(msgs, extra));
    } catch (const ApiError& e) {
      return e.param + " | " + e.what();
    }
    return "accepted";
  };
  EXPECT_EQ(refused(R"("response_format":{"type":"xml"})").substr(0, 23), "response_format.type | ");
  EXPECT_EQ(refused(R"("response_format":{"type":"json_schema","json_schema":{"name":"x"}})").substr(0, 36),
            "response_format.json_schema.schema |");
  const std::string not_supported =
      refused(R"("response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"not":{"type":"string"}}}})");
  EXPECT_EQ(not_supported.substr(0, 40), "response_format.json_schema.schema.not |") << not_supported;
  const std::string unenforced = refused(
      R"("response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","maxLength":5}}})");
  EXPECT_NE(unenforced.find("maxLength"), std::string::npos) << unenforced;
  EXPECT_NE(unenforced.find("not be enforced"), std::string::npos) << unenforced;
}

