// Anthropic Messages request bodies -> ChatRequest: every conversion rule and field of
// anthropic_messages.h / anthropic_request.h, checked on the exact JSON produced.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "keel/api/chat_request.h"

namespace {

using keel::api::ApiError;
using keel::api::ChatRequest;
using keel::api::RequestLimits;
using keel::api::ToolChoiceMode;
using Json = nlohmann::ordered_json;

ChatRequest parse(const std::string& body, const RequestLimits& limits = {}) {
  return keel::api::parse_anthropic_request(body, limits);
}

// A request around `messages` (JSON text) with `extra` top-level fields spliced in.
std::string body(const std::string& messages, const std::string& extra = "") {
  return R"({"model":"m","max_tokens":100,)" + (extra.empty() ? "" : extra + ",") + R"("messages":)" + messages + "}";
}

std::string messages_of(const std::string& b) { return parse(b).messages.dump(); }

}  // namespace

TEST(ApiAnthropicRequest, MinimalRequestAndDefaults) {
  ChatRequest r = parse(body(R"([{"role":"user","content":"hi"}])"));
  EXPECT_EQ(r.protocol, keel::api::Protocol::Anthropic);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.max_tokens, 100);
  EXPECT_EQ(r.messages.dump(), R"([{"role":"user","content":"hi"}])");
  EXPECT_TRUE(r.tools.is_null());
  EXPECT_EQ(r.tool_choice, ToolChoiceMode::Auto);
  EXPECT_TRUE(r.parallel_tool_calls);
  EXPECT_FLOAT_EQ(r.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.top_p, 1.0f);
  EXPECT_EQ(r.top_k, 0);
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_TRUE(r.stop_sequences.empty());
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.thinking);
  EXPECT_FALSE(r.assistant_prefill);
}

TEST(ApiAnthropicRequest, SystemStringBecomesTheFirstMessage) {
  EXPECT_EQ(messages_of(body(R"([{"role":"user","content":"hi"}])", R"("system":"be brief")")),
            R"([{"role":"system","content":"be brief"},{"role":"user","content":"hi"}])");
}

TEST(ApiAnthropicRequest, SystemBlocksDropTheBillingHeaderAndJoin) {
  std::string system = R"("system":[
    {"type":"text","text":"x-anthropic-billing-header: cc_version=1.0.83; cch=abc123;"},
    {"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}},
    {"type":"text","text":"Be careful."}])";
  EXPECT_EQ(messages_of(body(R"([{"role":"user","content":"hi"}])", system)),
            R"([{"role":"system","content":"You are Claude Code.\nBe careful."},{"role":"user","content":"hi"}])");
  // Two requests that differ only in the billing header render identically.
  std::string other = system;
  other.replace(other.find("abc123"), 6, "zzz999");
  EXPECT_EQ(messages_of(body(R"([{"role":"user","content":"hi"}])", system)),
            messages_of(body(R"([{"role":"user","content":"hi"}])", other)));
}

TEST(ApiAnthropicRequest, SystemOfOnlyABillingHeaderGivesNoSystemMessage) {
  EXPECT_EQ(messages_of(body(R"([{"role":"user","content":"hi"}])",
                             R"("system":[{"type":"text","text":"x-anthropic-billing-header: v=1"}])")),
            R"([{"role":"user","content":"hi"}])");
  EXPECT_EQ(messages_of(body(R"([{"role":"user","content":"hi"}])", R"("system":"")")), R"([{"role":"user","content":"hi"}])");
}

TEST(ApiAnthropicRequest, UserTextBlocks) {
  EXPECT_EQ(messages_of(body(R"([{"role":"user","content":[{"type":"text","text":"one"}]}])")),
            R"([{"role":"user","content":"one"}])");
  EXPECT_EQ(messages_of(body(R"([{"role":"user","content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]}])")),
            R"([{"role":"user","content":"one\ntwo"}])");
}

TEST(ApiAnthropicRequest, ToolResultsBecomeToolMessagesBeforeTheUserText) {
  std::string messages = R"([
    {"role":"user","content":"list and read"},
    {"role":"assistant","content":[
      {"type":"text","text":"Sure."},
      {"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}},
      {"type":"tool_use","id":"toolu_2","name":"Read","input":{"file_path":"/a"}}]},
    {"role":"user","content":[
      {"type":"text","text":"here you go"},
      {"type":"tool_result","tool_use_id":"toolu_1","content":"a.txt"},
      {"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"line1"},{"type":"text","text":"line2"}],"is_error":false},
      {"type":"tool_result","tool_use_id":"toolu_9","content":"boom","is_error":true},
      {"type":"tool_result","tool_use_id":"toolu_1"}]}])";
  Json m = parse(body(messages)).messages;
  ASSERT_EQ(m.size(), 7u);
  EXPECT_EQ(m[1].dump(),
            R"({"role":"assistant","content":"Sure.","tool_calls":[)"
            R"({"id":"toolu_1","type":"function","function":{"name":"Bash","arguments":{"command":"ls"}}},)"
            R"({"id":"toolu_2","type":"function","function":{"name":"Read","arguments":{"file_path":"/a"}}}]})");
  EXPECT_EQ(m[2].dump(), R"({"role":"tool","tool_call_id":"toolu_1","name":"Bash","content":"a.txt"})");
  EXPECT_EQ(m[3].dump(), R"({"role":"tool","tool_call_id":"toolu_2","name":"Read","content":"line1\nline2"})");
  // An id no earlier tool_use declared gets no name; is_error shows as a prefix.
  EXPECT_EQ(m[4].dump(), R"({"role":"tool","tool_call_id":"toolu_9","content":"Error: boom"})");
  EXPECT_EQ(m[5].dump(), R"({"role":"tool","tool_call_id":"toolu_1","name":"Bash","content":""})");
  EXPECT_EQ(m[6].dump(), R"({"role":"user","content":"here you go"})");
}

TEST(ApiAnthropicRequest, TurnOfOnlyToolResultsHasNoUserMessage) {
  std::string messages = R"([
    {"role":"user","content":"go"},
    {"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]},
    {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}])";
  EXPECT_EQ(messages_of(body(messages)),
            R"([{"role":"user","content":"go"},)"
            R"({"role":"assistant","content":"","tool_calls":[{"id":"t1","type":"function","function":{"name":"Bash","arguments":{}}}]},)"
            R"({"role":"tool","tool_call_id":"t1","name":"Bash","content":"ok"}])");
}

TEST(ApiAnthropicRequest, AssistantThinkingBecomesReasoningContent) {
  std::string messages = R"([
    {"role":"user","content":"q"},
    {"role":"assistant","content":[
      {"type":"thinking","thinking":"hmm","signature":"sig"},
      {"type":"redacted_thinking","data":"xxx"},
      {"type":"text","text":"a"},{"type":"text","text":"b"}]},
    {"role":"user","content":"next"}])";
  Json m = parse(body(messages)).messages;
  EXPECT_EQ(m[1].dump(), R"({"role":"assistant","content":"a\nb","reasoning_content":"hmm"})");
}

TEST(ApiAnthropicRequest, ToolUseInputAndSchemasKeepTheirKeyOrder) {
  std::string messages = R"([{"role":"user","content":"x"},
    {"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Edit","input":{"zeta":1,"alpha":{"y":2,"b":3},"mid":[{"q":1,"a":2}]}}]},
    {"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}])";
  std::string tools = R"("tools":[{"name":"Edit","description":"edit","input_schema":{"type":"object","required":["zeta"],"properties":{"zeta":{"type":"integer"},"alpha":{"type":"object"}}}}])";
  ChatRequest r = parse(body(messages, tools));
  EXPECT_EQ(r.messages[1]["tool_calls"][0]["function"]["arguments"].dump(), R"({"zeta":1,"alpha":{"y":2,"b":3},"mid":[{"q":1,"a":2}]})");
  EXPECT_EQ(r.tools.dump(),
            R"([{"type":"function","function":{"name":"Edit","description":"edit","parameters":)"
            R"({"type":"object","required":["zeta"],"properties":{"zeta":{"type":"integer"},"alpha":{"type":"object"}}}}}])");
}

TEST(ApiAnthropicRequest, ToolsWithoutDescriptionAndCustomType) {
  ChatRequest r = parse(body(R"([{"role":"user","content":"x"}])",
                             R"("tools":[{"type":"custom","name":"A","input_schema":{"type":"object"}}])"));
  EXPECT_EQ(r.tools.dump(), R"([{"type":"function","function":{"name":"A","parameters":{"type":"object"}}}])");
  EXPECT_TRUE(parse(body(R"([{"role":"user","content":"x"}])", R"("tools":[])")).tools.is_null());
}

TEST(ApiAnthropicRequest, ToolChoiceModes) {
  std::string tools = R"("tools":[{"name":"Bash","input_schema":{"type":"object"}}])";
  std::string msgs = R"([{"role":"user","content":"x"}])";
  EXPECT_EQ(parse(body(msgs, tools + R"(,"tool_choice":{"type":"auto"})")).tool_choice, ToolChoiceMode::Auto);
  EXPECT_EQ(parse(body(msgs, tools + R"(,"tool_choice":{"type":"any"})")).tool_choice, ToolChoiceMode::Any);
  EXPECT_EQ(parse(body(msgs, tools + R"(,"tool_choice":{"type":"none"})")).tool_choice, ToolChoiceMode::None);
  ChatRequest r = parse(body(msgs, tools + R"(,"tool_choice":{"type":"tool","name":"Bash","disable_parallel_tool_use":true})"));
  EXPECT_EQ(r.tool_choice, ToolChoiceMode::Tool);
  EXPECT_EQ(r.tool_choice_name, "Bash");
  EXPECT_FALSE(r.parallel_tool_calls);
}

TEST(ApiAnthropicRequest, SamplingStopStreamAndThinking) {
  ChatRequest r = parse(body(R"([{"role":"user","content":"x"}])",
                             R"("temperature":0,"top_p":0.9,"top_k":40,"stop_sequences":["END","\n\n"],"stream":true,)"
                             R"("thinking":{"type":"enabled","budget_tokens":1024},"metadata":{"user_id":"u"},"service_tier":"auto")"));
  EXPECT_FLOAT_EQ(r.temperature, 0.0f);
  EXPECT_FLOAT_EQ(r.top_p, 0.9f);
  EXPECT_EQ(r.top_k, 40);
  EXPECT_EQ(r.stop_sequences, (std::vector<std::string>{"END", "\n\n"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.thinking);
  EXPECT_FALSE(parse(body(R"([{"role":"user","content":"x"}])", R"("thinking":{"type":"disabled"})")).thinking);
}

TEST(ApiAnthropicRequest, ThinkingTypesMapToABudget) {
  const std::string msgs = R"([{"role":"user","content":"x"}])";
  ChatRequest enabled = parse(body(msgs, R"("thinking":{"type":"enabled","budget_tokens":1500})"));
  EXPECT_TRUE(enabled.thinking);
  EXPECT_EQ(enabled.reasoning_budget, 1500);
  ChatRequest adaptive = parse(body(msgs, R"("thinking":{"type":"adaptive","display":"summarized"})"));
  EXPECT_TRUE(adaptive.thinking);
  EXPECT_FALSE(adaptive.reasoning_budget.has_value());
  ChatRequest low = parse(body(msgs, R"("thinking":{"type":"adaptive"},"output_config":{"effort":"low"})"));
  EXPECT_EQ(low.reasoning_budget, 2048);
  ChatRequest between = parse(body(msgs, R"("thinking":{"type":"between_tools"})"));
  EXPECT_TRUE(between.thinking);
  ChatRequest off = parse(body(msgs, R"("thinking":{"type":"disabled"},"output_config":{"effort":"low"})"));
  EXPECT_FALSE(off.thinking);
}

TEST(ApiAnthropicRequest, MaxTokensIsClampedToTheCapOrRejected) {
  RequestLimits limits;
  limits.max_tokens_cap = 1000;
  EXPECT_EQ(parse(R"({"model":"m","max_tokens":64000,"messages":[{"role":"user","content":"x"}]})", limits).max_tokens, 1000);
  EXPECT_EQ(parse(R"({"model":"m","max_tokens":512.0,"messages":[{"role":"user","content":"x"}]})", limits).max_tokens, 512);
  limits.reject_max_tokens_over_cap = true;
  try {
    parse(R"({"model":"m","max_tokens":64000,"messages":[{"role":"user","content":"x"}]})", limits);
    FAIL() << "accepted max_tokens over the cap";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_STREQ(e.what(), "max_tokens: 64000 is more than this server's limit of 1000");
  }
}

TEST(ApiAnthropicRequest, FinalAssistantMessageIsAPrefill) {
  ChatRequest r = parse(body(R"([{"role":"user","content":"x"},{"role":"assistant","content":"The answer is"}])"));
  EXPECT_TRUE(r.assistant_prefill);
  EXPECT_EQ(r.messages.back().dump(), R"({"role":"assistant","content":"The answer is"})");
}

TEST(ApiAnthropicRequest, NestingWithinTheLimitIsAcceptedAndBeyondItRejected) {
  RequestLimits limits;
  limits.max_json_depth = 8;
  // root(1) > tools(2) > tool(3) > input_schema(4) > properties(5) > a(6) > b(7) > c(8)
  std::string ok = body(R"([{"role":"user","content":"x"}])",
                        R"("tools":[{"name":"T","input_schema":{"properties":{"a":{"b":{"c":{}}}}}}])");
  EXPECT_NO_THROW(parse(ok, limits));
  std::string deep = body(R"([{"role":"user","content":"x"}])",
                          R"("tools":[{"name":"T","input_schema":{"properties":{"a":{"b":{"c":{"d":{}}}}}}}])");
  EXPECT_THROW(parse(deep, limits), ApiError);
  // Brackets inside strings do not count.
  EXPECT_NO_THROW(parse(body(R"([{"role":"user","content":"[[[[[[[[[[[[{{{{{{{{{{\"]]]"}])"), limits));
}

TEST(ApiAnthropicRequest, HugeNestingIsA400NotACrash) {
  std::string bomb(200000, '[');
  try {
    parse(bomb);
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.type, "invalid_request_error");
    EXPECT_STREQ(e.what(), "request body nests arrays/objects deeper than 64 levels");
  }
}

namespace {

struct BadCase {
  std::string body;
  std::string message;
};

// Structured output (output_config.format, or the beta's output_format) is the answer's grammar,
// never ignored; a tool's strict flag is kept by name.
TEST(ApiAnthropicRequest, OutputFormatIsTheAnswersGrammarAndStrictToolsAreKept) {
  const std::string msgs = R"([{"role":"user","content":"x"}])";
  const std::string schema = R"({"type":"object","properties":{"title":{"type":"string"}},"required":["title"],"additionalProperties":false})";
  EXPECT_NE(parse(body(msgs, R"("output_config":{"format":{"type":"json_schema","schema":)" + schema + "}}")).answer_grammar, nullptr);
  EXPECT_NE(parse(body(msgs, R"("output_format":{"type":"json_schema","schema":)" + schema + "}")).answer_grammar, nullptr);
  EXPECT_EQ(parse(body(msgs, R"("output_config":{"effort":"low"})")).answer_grammar, nullptr);
  try {
    parse(body(msgs, R"("output_config":{"format":{"type":"json_schema","schema":{"type":"string","pattern":"^a"}}})"));
    ADD_FAILURE() << "a pattern the grammar does not enforce was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "output_config.format.schema.pattern") << e.what();
  }
  const ChatRequest tools = parse(body(msgs, R"("tools":[{"name":"a","input_schema":{"type":"object"},"strict":true},
      {"name":"b","input_schema":{"type":"object"}}])"));
  EXPECT_EQ(tools.tool_strict.at("a"), true);
  EXPECT_FALSE(tools.tool_strict.contains("b"));
}

}  // namespace

TEST(ApiAnthropicRequest, EachMalformedRequestIsA400NamingTheField) {
  const std::string ok_msgs = R"([{"role":"user","content":"x"}])";
  const std::vector<BadCase> cases = {
      {"not json", "request body is not valid JSON (at byte 2)"},
      {"[1,2]", "request body must be a JSON object, got array"},
      {R"({"max_tokens":10,"messages":[]})", "model: field required"},
      {R"({"model":7,"max_tokens":10,"messages":[]})", "model: expected a string, got number"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}]})", "max_tokens: field required"},
      {R"({"model":"m","max_tokens":"10","messages":[]})", "max_tokens: expected an integer, got string"},
      {R"({"model":"m","max_tokens":1.5,"messages":[]})", "max_tokens: expected an integer, got 1.5"},
      {R"({"model":"m","max_tokens":0,"messages":[]})", "max_tokens: must be at least 1, got 0"},
      {R"({"model":"m","max_tokens":10})", "messages: field required"},
      {R"({"model":"m","max_tokens":10,"messages":{}})", "messages: expected an array, got object"},
      {R"({"model":"m","max_tokens":10,"messages":[]})", "messages: must contain at least one message"},
      {body(R"([{"role":"user","content":"x"},"hello"])"), "messages.1: expected an object, got string"},
      {body(R"([{"content":"x"}])"), "messages.0.role: field required"},
      {body(R"([{"role":"tool","content":"x"}])"), "messages.0.role: unknown role \"tool\" (expected \"user\", \"assistant\" or \"system\")"},
      {body(R"([{"role":"user","content":"x"},{"role":"system","content":[{"type":"tool_use","id":"a","name":"b","input":{}}]}])"),
       "messages.1.content.0.type: unknown content block type \"tool_use\""},
      {body(R"([{"role":"user"}])"), "messages.0.content: field required"},
      {body(R"([{"role":"user","content":5}])"), "messages.0.content: expected a string or an array of content blocks, got number"},
      {body(R"([{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"},)"
            R"({"role":"user","content":[{"type":"foo"}]}])"),
       "messages.3.content.0.type: unknown content block type \"foo\""},
      {body(R"([{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}])"),
       "messages.0.content.1: image content is not supported yet"},
      {body(R"([{"role":"user","content":[{"type":"document","source":{}}]}])"), "messages.0.content.0: document content is not supported yet"},
      {body(R"([{"role":"user","content":[{"type":"text"}]}])"), "messages.0.content.0.text: field required"},
      {body(R"([{"role":"user","content":[{"text":"x"}]}])"), "messages.0.content.0.type: field required"},
      {body(R"([{"role":"user","content":[{"type":"tool_use","id":"a","name":"b","input":{}}]}])"),
       "messages.0.content.0.type: \"tool_use\" blocks are only allowed in assistant messages"},
      {body(R"([{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"a"}]}])"),
       "messages.0.content.0.type: \"tool_result\" blocks are only allowed in user messages"},
      {body(R"([{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"b"}]}])"), "messages.0.content.0.input: field required"},
      {body(R"([{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"b","input":"{}"}]}])"),
       "messages.0.content.0.input: expected an object, got string"},
      {body(R"([{"role":"user","content":[{"type":"tool_result","content":"x"}]}])"), "messages.0.content.0.tool_use_id: field required"},
      {body(R"([{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"image"}]}]}])"),
       "messages.0.content.0.content.0: image content is not supported yet"},
      {body(R"([{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","is_error":"yes"}]}])"),
       "messages.0.content.0.is_error: expected a boolean, got string"},
      {body(ok_msgs, R"("system":42)"), "system: expected a string or an array of text blocks, got number"},
      {body(ok_msgs, R"("system":[{"type":"image"}])"), "system.0.type: system blocks must be of type \"text\", got \"image\""},
      {body(ok_msgs, R"("temperature":1.5)"), "temperature: must be between 0 and 1, got 1.5"},
      {body(ok_msgs, R"("top_p":"high")"), "top_p: expected a number, got string"},
      {body(ok_msgs, R"("top_k":-1)"), "top_k: must be between 0 and 2147483647"},
      {body(ok_msgs, R"("stop_sequences":"END")"), "stop_sequences: expected an array of strings, got string"},
      {body(ok_msgs, R"("stop_sequences":["a",3])"), "stop_sequences.1: expected a string, got number"},
      {body(ok_msgs, R"("stream":"yes")"), "stream: expected a boolean, got string"},
      {body(ok_msgs, R"("thinking":{"type":"maybe"})"), "thinking.type: unknown thinking type \"maybe\" (expected enabled, adaptive, between_tools or disabled)"},
      {body(ok_msgs, R"("tools":{})"), "tools: expected an array, got object"},
      {body(ok_msgs, R"("tools":[{"name":"A"}])"), "tools.0.input_schema: field required"},
      {body(ok_msgs, R"("tools":[{"input_schema":{}}])"), "tools.0.name: field required"},
      {body(ok_msgs, R"("tools":[{"name":"A","input_schema":{}},{"name":"A","input_schema":{}}])"), "tools.1.name: duplicate tool name \"A\""},
      {body(ok_msgs, R"("tools":[{"type":"web_search_20250305","name":"web_search"}])"),
       "tools.0.type: tool type \"web_search_20250305\" is not supported (only client tools with input_schema)"},
      {body(ok_msgs, R"("tool_choice":{"type":"any"})"), "tool_choice: requires tools, and the request has none"},
      {body(ok_msgs, R"("tools":[{"name":"A","input_schema":{}}],"tool_choice":{"type":"tool","name":"B"})"),
       "tool_choice: no tool named \"B\" in tools"},
      {body(ok_msgs, R"("tools":[{"name":"A","input_schema":{}}],"tool_choice":{"type":"tool"})"), "tool_choice.name: field required"},
      {body(ok_msgs, R"("tool_choice":{"type":"sometimes"})"),
       "tool_choice.type: unknown tool_choice type \"sometimes\" (expected auto, any, tool or none)"},
  };
  for (const auto& c : cases) {
    try {
      parse(c.body);
      ADD_FAILURE() << "accepted: " << c.body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400) << c.body;
      EXPECT_EQ(e.type, "invalid_request_error") << c.body;
      EXPECT_EQ(std::string(e.what()), c.message) << c.body;
    }
  }
}

TEST(ApiAnthropicRequest, MessageAndToolCountLimits) {
  RequestLimits limits;
  limits.max_messages = 2;
  limits.max_tools = 1;
  try {
    parse(body(R"([{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}])"), limits);
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_STREQ(e.what(), "messages: 3 messages is more than this server's limit of 2");
  }
  try {
    parse(body(R"([{"role":"user","content":"a"}])", R"("tools":[{"name":"A","input_schema":{}},{"name":"B","input_schema":{}}])"), limits);
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_STREQ(e.what(), "tools: 2 tools is more than this server's limit of 1");
  }
}

TEST(ApiAnthropicRequest, CountTokensBodiesNeedNoMaxTokens) {
  const std::string b = R"({"model":"m","system":"s","messages":[{"role":"user","content":"x"}]})";
  ChatRequest r = keel::api::parse_anthropic_count_tokens_request(b, {});
  EXPECT_EQ(r.messages.dump(), R"([{"role":"system","content":"s"},{"role":"user","content":"x"}])");
  EXPECT_EQ(r.max_tokens, 1);
  EXPECT_THROW(parse(b), ApiError);  // a Messages request does need it
  // Everything else is checked the same way.
  EXPECT_THROW(keel::api::parse_anthropic_count_tokens_request(R"({"model":"m","messages":[]})", {}), ApiError);
}
