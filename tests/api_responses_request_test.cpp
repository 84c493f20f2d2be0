// OpenAI Responses request bodies -> ChatRequest: input as a string and as items (Codex's shapes:
// developer and user messages, function_call / function_call_output pairs, reasoning replayed),
// tools in their flat form, the sampling fields, and every refusal with its field as `param`.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "keel/api/chat_request.h"

namespace {

using keel::api::ApiError;
using keel::api::ChatRequest;
using keel::api::ToolChoiceMode;
using Json = nlohmann::ordered_json;

ChatRequest parse(const Json& body) { return keel::api::parse_responses_request(body.dump(), {}); }

Json request(Json input) { return {{"model", "m"}, {"input", std::move(input)}}; }

// The field a refused body names (ApiError::param), or "" when it is accepted.
std::string refused_param(const Json& body) {
  try {
    parse(body);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400) << e.what();
    return e.param;
  }
  return "";
}

const Json kTool = {{"type", "function"}, {"name", "exec_command"}, {"description", "Run a command."}, {"strict", false},
                    {"parameters", {{"type", "object"}, {"properties", {{"cmd", {{"type", "string"}}}}}, {"required", {"cmd"}}}}};

}  // namespace

TEST(ApiResponsesRequest, StringInputInstructionsAndDefaults) {
  Json body = request("hi");
  body["instructions"] = "Be brief.";
  const ChatRequest r = parse(body);
  EXPECT_EQ(r.protocol, keel::api::Protocol::Responses);
  EXPECT_EQ(r.messages.dump(), R"([{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}])");
  EXPECT_EQ(r.max_tokens, keel::api::kDefaultOpenAIMaxTokens);
  EXPECT_TRUE(r.tools.is_null());
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.thinking);
  EXPECT_FALSE(r.assistant_prefill);
}

TEST(ApiResponsesRequest, CodexHistoryBecomesChatMessages) {
  // What Codex CLI 0.171 re-sends on its second request: developer prompt, user messages, the
  // reasoning and call of the first answer, the command's output.
  const Json input = Json::parse(R"([
    {"type":"message","id":"msg_1","role":"developer","content":[{"type":"input_text","text":"You are Codex."}]},
    {"type":"message","id":"msg_2","role":"user","content":[{"type":"input_text","text":"<environment_context/>"},{"type":"input_text","text":"say hi"}]},
    {"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"short"}],"content":[{"type":"reasoning_text","text":"I should run echo."}],"encrypted_content":null},
    {"type":"message","id":"msg_3","role":"assistant","content":[{"type":"output_text","text":"Running it."}]},
    {"type":"function_call","status":"completed","id":"fc_1","name":"exec_command","arguments":"{\"cmd\": \"echo hi\"}","call_id":"call_1"},
    {"type":"function_call","id":"fc_2","name":"exec_command","arguments":"{\"cmd\": \"pwd\"}","call_id":"call_2"},
    {"type":"function_call_output","id":"fco_1","call_id":"call_1","output":"hi\n"},
    {"type":"function_call_output","call_id":"call_2","output":[{"type":"input_text","text":"/tmp"}]},
    {"role":"user","content":"thanks"}
  ])");
  Json body = request(input);
  body["tools"] = Json::array({kTool});
  body["reasoning"] = {{"summary", "auto"}};
  body["include"] = {"reasoning.encrypted_content"};
  body["store"] = false;
  body["prompt_cache_key"] = "thread-1";
  body["client_metadata"] = {{"session_id", "s"}};
  const ChatRequest r = parse(body);
  const Json want = Json::parse(R"([
    {"role":"system","content":"You are Codex."},
    {"role":"user","content":"<environment_context/>\nsay hi"},
    {"role":"assistant","content":"Running it.","reasoning_content":"I should run echo.","tool_calls":[
      {"id":"call_1","type":"function","function":{"name":"exec_command","arguments":"{\"cmd\": \"echo hi\"}"}},
      {"id":"call_2","type":"function","function":{"name":"exec_command","arguments":"{\"cmd\": \"pwd\"}"}}]},
    {"role":"tool","tool_call_id":"call_1","name":"exec_command","content":"hi\n"},
    {"role":"tool","tool_call_id":"call_2","name":"exec_command","content":"/tmp"},
    {"role":"user","content":"thanks"}
  ])");
  EXPECT_EQ(r.messages, want) << r.messages.dump(1);
  EXPECT_EQ(r.tools.dump(), Json::array({{{"type", "function"}, {"function", {{"name", "exec_command"},
                                          {"description", "Run a command."}, {"parameters", kTool["parameters"]}}}}}).dump());
  EXPECT_EQ(r.user, "thread-1");
  EXPECT_FALSE(r.thinking);  // reasoning without an effort leaves the template's default
}

TEST(ApiResponsesRequest, ReasoningBeforeACallStartsTheAssistantTurn) {
  const ChatRequest r = parse(request(Json::parse(R"([
    {"role":"user","content":"go"},
    {"type":"reasoning","summary":[{"type":"summary_text","text":"plan"}]},
    {"type":"function_call","call_id":"c","name":"f","arguments":"{}"},
    {"type":"function_call_output","call_id":"c","output":"done"}])")));
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[1]["reasoning_content"], "plan");
  EXPECT_EQ(r.messages[1]["content"], "");
  EXPECT_EQ(r.messages[2]["name"], "f");
}

TEST(ApiResponsesRequest, AnAssistantMessageLastIsAPrefill) {
  EXPECT_TRUE(parse(request(Json::parse(R"([{"role":"user","content":"go"},{"role":"assistant","content":"Sure,"}])")))
                  .assistant_prefill);
}

TEST(ApiResponsesRequest, SamplingToolChoiceAndEffort) {
  Json body = request("hi");
  body["tools"] = Json::array({kTool});
  body["tool_choice"] = {{"type", "function"}, {"name", "exec_command"}};
  body["max_output_tokens"] = 77;
  body["temperature"] = 0.5;
  body["top_p"] = 0.9;
  body["parallel_tool_calls"] = false;
  body["reasoning"] = {{"effort", "high"}};
  body["stream"] = true;
  const ChatRequest r = parse(body);
  EXPECT_EQ(r.tool_choice, ToolChoiceMode::Tool);
  EXPECT_EQ(r.tool_choice_name, "exec_command");
  EXPECT_EQ(r.max_tokens, 77);
  EXPECT_FLOAT_EQ(r.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.top_p, 0.9f);
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_TRUE(r.thinking);
  EXPECT_EQ(r.reasoning_effort, "high");
  EXPECT_TRUE(r.stream);
  body["tool_choice"] = "required";
  EXPECT_EQ(parse(body).tool_choice, ToolChoiceMode::Any);
}

TEST(ApiResponsesRequest, WhatKeelCannotHonourIsRefusedByName) {
  Json web = request("hi");
  web["tools"] = Json::array({kTool, {{"type", "web_search"}}});
  EXPECT_EQ(refused_param(web), "tools.1.type");
  Json ns = request("hi");
  ns["tools"] = Json::array({{{"type", "namespace"}, {"name", "multi_agent_v1"}, {"tools", Json::array()}}});
  EXPECT_EQ(refused_param(ns), "tools.0.type");
  Json previous = request("hi");
  previous["previous_response_id"] = "resp_1";
  EXPECT_EQ(refused_param(previous), "previous_response_id");
  Json schema = request("hi");
  schema["text"] = {{"format", {{"type", "json_schema"}, {"name", "x"}, {"schema", Json::object()}}}};
  EXPECT_EQ(refused_param(schema), "");
  schema["text"]["format"]["schema"] = {{"type", "object"}, {"patternProperties", Json::object()}};
  EXPECT_EQ(refused_param(schema), "text.format.schema.patternProperties");
  schema["text"]["format"].erase("schema");
  EXPECT_EQ(refused_param(schema), "text.format.schema");
  Json verbosity = request("hi");
  verbosity["text"] = {{"verbosity", "low"}, {"format", {{"type", "text"}}}};
  EXPECT_EQ(refused_param(verbosity), "");
  EXPECT_EQ(refused_param(request(Json::parse(R"([{"role":"user","content":[{"type":"input_image","image_url":"x"}]}])"))),
            "input.0.content.0.type");
  EXPECT_EQ(refused_param(request(Json::parse(R"([{"type":"local_shell_call","call_id":"c"}])"))), "input.0.type");
  EXPECT_EQ(refused_param(request(Json::parse(R"([{"role":"tool","content":"x"}])"))), "input.0.role");
  EXPECT_EQ(refused_param(request(Json::array())), "input");
  EXPECT_EQ(refused_param(request(42)), "input");
  EXPECT_EQ(refused_param({{"model", "m"}}), "input");
  Json background = request("hi");
  background["background"] = true;
  EXPECT_EQ(refused_param(background), "background");
  Json choice = request("hi");
  choice["tool_choice"] = {{"type", "function"}, {"name", "nope"}};
  EXPECT_EQ(refused_param(choice), "tool_choice");
}
