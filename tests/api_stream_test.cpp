// The SSE event grammar of both APIs, event by event, for the shapes a server produces: text only,
// a tool call, thinking then text, text then two tool calls, and a max_tokens cut.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "keel/api/sse_writer.h"

namespace {

using namespace keel::api;
using Json = nlohmann::ordered_json;

ChatRequest stream_request(Protocol protocol, bool include_usage) {
  ChatRequest r;
  r.protocol = protocol;
  r.include_usage = include_usage;
  return r;
}

struct Event {
  std::string name;  // "" for OpenAI data-only events
  std::string data;
};

// Splits SSE text into events; fails the test on anything outside the framing.
std::vector<Event> events(const std::string& sse) {
  std::vector<Event> out;
  size_t pos = 0;
  while (pos < sse.size()) {
    size_t end = sse.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "unterminated event: " << sse.substr(pos);
    if (end == std::string::npos) break;
    std::string record = sse.substr(pos, end - pos);
    pos = end + 2;
    Event e;
    size_t line_start = 0;
    while (line_start <= record.size()) {
      size_t nl = record.find('\n', line_start);
      std::string line = record.substr(line_start, nl == std::string::npos ? std::string::npos : nl - line_start);
      if (line.rfind("event: ", 0) == 0) {
        e.name = line.substr(7);
      } else if (line.rfind("data: ", 0) == 0) {
        e.data = line.substr(6);
      } else if (line.rfind(":", 0) == 0) {
        e.name = "comment";
      } else {
        ADD_FAILURE() << "bad SSE line: " << line;
      }
      if (nl == std::string::npos) break;
      line_start = nl + 1;
    }
    out.push_back(e);
  }
  return out;
}

// "name data-json" lines, easy to compare as a whole.
std::vector<std::string> transcript(const std::string& sse) {
  std::vector<std::string> lines;
  for (const auto& e : events(sse)) {
    if (!e.name.empty() && e.name != "comment") {
      // Anthropic repeats the event name as data.type.
      EXPECT_EQ(Json::parse(e.data)["type"], e.name) << e.data;
    }
    lines.push_back(e.name.empty() ? e.data : e.name + " " + e.data);
  }
  return lines;
}

const Usage kStartUsage{12, 1, 0, 0};
const Usage kEndUsage{12, 30, 0, 0};

std::string start_line(const char* id) {
  return std::string("message_start {\"type\":\"message_start\",\"message\":{\"id\":\"") + id +
         R"(","type":"message","role":"assistant","model":"tiny","content":[],"stop_reason":null,"stop_sequence":null,)"
         R"("usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}})";
}

std::string delta_line(const std::string& reason) {
  return R"(message_delta {"type":"message_delta","delta":{"stop_reason":")" + reason +
         R"(","stop_sequence":null},"usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":30}})";
}

const std::string kStop = R"(message_stop {"type":"message_stop"})";

}  // namespace

TEST(ApiAnthropicStream, TextOnlyNeverOpensAnEmptyBlock) {
  auto w = make_stream_writer(stream_request(Protocol::Anthropic, false), 0);
  std::string sse = w->start("msg_a", "tiny", kStartUsage);
  sse += w->text("");  // the parser may hand over nothing yet: no block must open
  sse += w->ping();
  sse += w->text("Hel");
  sse += w->text("lo");
  sse += w->finish(FinishReason::EndTurn, "", kEndUsage);
  EXPECT_EQ(transcript(sse), (std::vector<std::string>{
                                 start_line("msg_a"),
                                 R"(ping {"type":"ping"})",
                                 R"(content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})",
                                 R"(content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}})",
                                 R"(content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}})",
                                 R"(content_block_stop {"type":"content_block_stop","index":0})",
                                 delta_line("end_turn"),
                                 kStop,
                             }));
  // Nothing after the end.
  EXPECT_EQ(w->text("late"), "");
  EXPECT_EQ(w->finish(FinishReason::EndTurn, "", kEndUsage), "");
}

TEST(ApiAnthropicStream, ToolUseOnly) {
  auto w = make_stream_writer(stream_request(Protocol::Anthropic, false), 0);
  std::string sse = w->start("msg_b", "tiny", kStartUsage);
  Json input = Json::parse(R"({"command":"ls /tmp","description":"list"})");
  sse += w->tool_use("toolu_1", "Bash", input);
  sse += w->finish(FinishReason::ToolUse, "", kEndUsage);
  EXPECT_EQ(transcript(sse),
            (std::vector<std::string>{
                start_line("msg_b"),
                R"(content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}}})",
                R"(content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"command\":\"ls /tmp\",\"description\":\"list\"}"}})",
                R"(content_block_stop {"type":"content_block_stop","index":0})",
                delta_line("tool_use"),
                kStop,
            }));
}

TEST(ApiAnthropicStream, ThinkingThenText) {
  auto w = make_stream_writer(stream_request(Protocol::Anthropic, false), 0);
  std::string sse = w->start("msg_c", "tiny", kStartUsage);
  sse += w->thinking("Let me ");
  sse += w->thinking("think.");
  sse += w->text("Answer.");
  sse += w->finish(FinishReason::EndTurn, "", kEndUsage);
  EXPECT_EQ(transcript(sse),
            (std::vector<std::string>{
                start_line("msg_c"),
                R"(content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}})",
                R"(content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me "}})",
                R"(content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"think."}})",
                R"(content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":""}})",
                R"(content_block_stop {"type":"content_block_stop","index":0})",
                R"(content_block_start {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}})",
                R"(content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Answer."}})",
                R"(content_block_stop {"type":"content_block_stop","index":1})",
                delta_line("end_turn"),
                kStop,
            }));
}

TEST(ApiAnthropicStream, TextThenTwoToolCallsKeepOrderAndKeyOrder) {
  auto w = make_stream_writer(stream_request(Protocol::Anthropic, false), 0);
  std::string sse = w->start("msg_d", "tiny", kStartUsage);
  sse += w->text("Checking both.");
  Json first = Json::parse(R"({"zeta":"1","alpha":{"y":true,"b":null}})");
  Json second = Json::parse(R"({"file_path":"/etc/hosts"})");
  sse += w->tool_use("toolu_1", "Bash", first);
  sse += w->tool_use("toolu_2", "Read", second);
  sse += w->finish(FinishReason::ToolUse, "", kEndUsage);
  auto lines = transcript(sse);
  ASSERT_EQ(lines.size(), 12u);
  EXPECT_EQ(lines[1], R"(content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})");
  EXPECT_EQ(lines[3], R"(content_block_stop {"type":"content_block_stop","index":0})");
  EXPECT_EQ(lines[4],
            R"(content_block_start {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}}})");
  EXPECT_EQ(lines[7],
            R"(content_block_start {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_2","name":"Read","input":{}}})");
  EXPECT_EQ(lines[9], R"(content_block_stop {"type":"content_block_stop","index":2})");
  EXPECT_EQ(lines[10], delta_line("tool_use"));
  // What a client accumulates from the input_json_deltas is the input, keys in the model's order.
  std::string accumulated[2];
  for (const auto& e : events(sse)) {
    if (e.name != "content_block_delta") continue;
    Json d = Json::parse(e.data);
    if (d["delta"]["type"] == "input_json_delta") accumulated[d["index"].get<int>() - 1] += d["delta"]["partial_json"].get<std::string>();
  }
  EXPECT_EQ(accumulated[0], R"({"zeta":"1","alpha":{"y":true,"b":null}})");
  EXPECT_EQ(Json::parse(accumulated[1]), second);
}

TEST(ApiAnthropicStream, MaxTokensAndStopSequence) {
  auto w = make_stream_writer(stream_request(Protocol::Anthropic, false), 0);
  // One statement per call: the operands of + are evaluated in no fixed order.
  std::string sse = w->start("msg_e", "tiny", kStartUsage);
  sse += w->text("cut off mid");
  sse += w->finish(FinishReason::MaxTokens, "", kEndUsage);
  auto lines = transcript(sse);
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[4], delta_line("max_tokens"));
  EXPECT_EQ(lines[5], kStop);

  auto s = make_stream_writer(stream_request(Protocol::Anthropic, false), 0);
  std::string sse2 = s->start("msg_f", "tiny", kStartUsage);
  sse2 += s->finish(FinishReason::StopSequence, "END", kEndUsage);
  auto lines2 = transcript(sse2);
  ASSERT_EQ(lines2.size(), 3u);  // an empty answer has no content block at all
  EXPECT_EQ(Json::parse(events(sse2)[1].data)["delta"].dump(), R"({"stop_reason":"stop_sequence","stop_sequence":"END"})");
}

TEST(ApiAnthropicStream, ErrorEventEndsTheStream) {
  auto w = make_stream_writer(stream_request(Protocol::Anthropic, false), 0);
  std::string sse = w->start("msg_g", "tiny", kStartUsage);
  sse += w->text("partial");
  sse += w->error(overloaded("Overloaded"));
  auto lines = transcript(sse);
  EXPECT_EQ(lines.back(), R"(error {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})");
  EXPECT_EQ(w->finish(FinishReason::EndTurn, "", kEndUsage), "");
}

namespace {

std::string chunk(const std::string& delta, const std::string& finish = "null", bool usage = false) {
  return R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"tiny","choices":[{"index":0,"delta":)" + delta +
         R"(,"logprobs":null,"finish_reason":)" + finish + "}]" + (usage ? R"(,"usage":null)" : "") + "}";
}

}  // namespace

TEST(ApiOpenAIStream, TextOnly) {
  auto w = make_stream_writer(stream_request(Protocol::OpenAI, false), 1700000000);
  std::string sse = w->start("chatcmpl-1", "tiny", kStartUsage);
  sse += w->text("");
  sse += w->text("Hel");
  sse += w->ping();
  sse += w->text("lo");
  sse += w->finish(FinishReason::EndTurn, "", kEndUsage);
  EXPECT_EQ(transcript(sse), (std::vector<std::string>{
                                 chunk(R"({"role":"assistant","content":""})"),
                                 chunk(R"({"content":"Hel"})"),
                                 "comment ",
                                 chunk(R"({"content":"lo"})"),
                                 chunk("{}", R"("stop")"),
                                 "[DONE]",
                             }));
}

TEST(ApiOpenAIStream, ToolCallWithUsage) {
  auto w = make_stream_writer(stream_request(Protocol::OpenAI, true), 1700000000);
  std::string sse = w->start("chatcmpl-1", "tiny", kStartUsage);
  sse += w->tool_use("call_1", "get_weather", Json::parse(R"({"city":"Paris","unit":"c"})"));
  sse += w->finish(FinishReason::ToolUse, "", Usage{10, 30, 2, 0});
  EXPECT_EQ(transcript(sse),
            (std::vector<std::string>{
                chunk(R"({"role":"assistant","content":""})", "null", true),
                chunk(R"({"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]})", "null", true),
                chunk(R"({"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Paris\",\"unit\":\"c\"}"}}]})", "null", true),
                chunk("{}", R"("tool_calls")", true),
                R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"tiny","choices":[],)"
                R"("usage":{"prompt_tokens":12,"completion_tokens":30,"total_tokens":42,"prompt_tokens_details":{"cached_tokens":2}}})",
                "[DONE]",
            }));
}

TEST(ApiOpenAIStream, ThinkingThenTextThenTwoToolCalls) {
  auto w = make_stream_writer(stream_request(Protocol::OpenAI, false), 1700000000);
  std::string sse = w->start("chatcmpl-1", "tiny", kStartUsage);
  sse += w->thinking("hmm");
  sse += w->text("Two calls.");
  sse += w->tool_use("call_a", "f", Json::parse(R"({"b":1,"a":2})"));
  sse += w->tool_use("call_b", "f", Json::object());
  sse += w->finish(FinishReason::ToolUse, "", kEndUsage);
  EXPECT_EQ(transcript(sse),
            (std::vector<std::string>{
                chunk(R"({"role":"assistant","content":""})"),
                chunk(R"({"reasoning_content":"hmm"})"),
                chunk(R"({"content":"Two calls."})"),
                chunk(R"({"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":""}}]})"),
                chunk(R"({"tool_calls":[{"index":0,"function":{"arguments":"{\"b\":1,\"a\":2}"}}]})"),
                chunk(R"({"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"f","arguments":""}}]})"),
                chunk(R"({"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]})"),
                chunk("{}", R"("tool_calls")"),
                "[DONE]",
            }));
}

TEST(ApiOpenAIStream, MaxTokensAndError) {
  auto w = make_stream_writer(stream_request(Protocol::OpenAI, false), 1700000000);
  std::string sse = w->start("chatcmpl-1", "tiny", kStartUsage);
  sse += w->text("cut");
  sse += w->finish(FinishReason::MaxTokens, "", kEndUsage);
  auto lines = transcript(sse);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[2], chunk("{}", R"("length")"));
  EXPECT_EQ(lines[3], "[DONE]");

  auto e = make_stream_writer(stream_request(Protocol::OpenAI, false), 1700000000);
  std::string sse2 = e->start("chatcmpl-1", "tiny", kStartUsage);
  sse2 += e->error(overloaded("busy"));
  auto lines2 = transcript(sse2);
  ASSERT_EQ(lines2.size(), 3u);
  EXPECT_EQ(lines2[1], R"({"error":{"message":"busy","type":"server_error","param":null,"code":null}})");
  EXPECT_EQ(lines2[2], "[DONE]");
}

TEST(ApiAnthropicStream, WhitespaceAloneOpensNoBlock) {
  auto w = make_stream_writer(stream_request(Protocol::Anthropic, false), 0);
  std::string sse = w->start("msg_h", "tiny", kStartUsage);
  sse += w->text("\n");  // what a model writes before <tool_call>
  sse += w->tool_use("toolu_1", "Bash", Json::parse(R"({"command":"pwd"})"));
  sse += w->text(" ");
  sse += w->text("\n");
  sse += w->text("Done.");
  sse += w->finish(FinishReason::EndTurn, "", kEndUsage);
  auto lines = transcript(sse);
  ASSERT_EQ(lines.size(), 9u);
  EXPECT_EQ(lines[1],
            R"(content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}}})");
  EXPECT_EQ(lines[4], R"(content_block_start {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}})");
  // Whitespace that precedes real text is kept, in order.
  EXPECT_EQ(lines[5], R"(content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":" \nDone."}})");
}

// The Responses stream: sequence numbers from 0 in order, each item added before its deltas and
// done after them, the completed response holding every item, and max_output_tokens as
// response.incomplete; a failure after the start is an error event and response.failed.
namespace {

std::vector<Json> responses_events(const std::string& sse) {
  std::vector<Json> out;
  for (const Event& e : events(sse)) {
    if (e.name == "comment") continue;  // a ping
    Json data = Json::parse(e.data);
    EXPECT_EQ(data["type"], e.name);
    out.push_back(std::move(data));
  }
  return out;
}

std::vector<std::string> types_of(const std::vector<Json>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e["type"]);
  return out;
}

}  // namespace

TEST(ApiResponsesStream, ReasoningTextAndACallInOrder) {
  auto w = make_stream_writer(stream_request(Protocol::Responses, false), 1700000000);
  std::string sse = w->start("resp_a", "tiny", kStartUsage);
  sse += w->thinking("Let me ");
  sse += w->thinking("look.");
  sse += w->ping();
  sse += w->text("Listing");
  sse += w->text(" files.");
  sse += w->tool_use("call_1", "Bash", Json{{"command", "ls"}});
  Usage end = kEndUsage;
  end.reasoning_tokens = 3;
  sse += w->finish(FinishReason::ToolUse, "", end);
  const std::vector<Json> ev = responses_events(sse);
  EXPECT_EQ(types_of(ev), (std::vector<std::string>{
      "response.created", "response.in_progress",
      "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
      "response.reasoning_text.delta", "response.reasoning_text.done", "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added", "response.content_part.added", "response.output_text.delta",
      "response.output_text.delta", "response.output_text.done", "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added", "response.function_call_arguments.delta",
      "response.function_call_arguments.done", "response.output_item.done",
      "response.completed"}));
  for (size_t i = 0; i < ev.size(); ++i) EXPECT_EQ(ev[i]["sequence_number"], i);
  EXPECT_EQ(ev[0]["response"]["id"], "resp_a");
  EXPECT_EQ(ev[0]["response"]["status"], "in_progress");
  EXPECT_EQ(ev[13]["text"], "Listing files.");
  EXPECT_EQ(ev[13]["output_index"], 1);
  EXPECT_EQ(ev[16]["item"]["arguments"], "");
  EXPECT_EQ(ev[17]["delta"], R"({"command":"ls"})");
  const Json& call = ev[19]["item"];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["call_id"], "call_1");
  EXPECT_EQ(call["arguments"], R"({"command":"ls"})");
  const Json& done = ev.back()["response"];
  EXPECT_EQ(done["status"], "completed");
  ASSERT_EQ(done["output"].size(), 3u);
  EXPECT_EQ(done["output"][0]["content"][0]["text"], "Let me look.");
  EXPECT_EQ(done["output"][1]["id"], ev[9]["item"]["id"]);
  EXPECT_EQ(done["output"][2], call);
  EXPECT_EQ(done["usage"]["input_tokens"], 12);
  EXPECT_EQ(done["usage"]["total_tokens"], 42);
  EXPECT_EQ(done["usage"]["output_tokens_details"]["reasoning_tokens"], 3);
}

TEST(ApiResponsesStream, MaxTokensIsIncompleteAndAFailureIsResponseFailed) {
  auto w = make_stream_writer(stream_request(Protocol::Responses, false), 0);
  std::string sse = w->start("resp_b", "tiny", kStartUsage);
  sse += w->text("Hel");
  sse += w->finish(FinishReason::MaxTokens, "", kEndUsage);
  std::vector<Json> ev = responses_events(sse);
  EXPECT_EQ(ev.back()["type"], "response.incomplete");
  EXPECT_EQ(ev.back()["response"]["status"], "incomplete");
  EXPECT_EQ(ev.back()["response"]["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(ev.back()["response"]["output"][0]["content"][0]["text"], "Hel");

  auto f = make_stream_writer(stream_request(Protocol::Responses, false), 0);
  sse = f->start("resp_c", "tiny", kStartUsage);
  sse += f->text("Hel");
  sse += f->error(keel::api::overloaded("busy"));
  sse += f->finish(FinishReason::EndTurn, "", kEndUsage);  // nothing after the failure
  ev = responses_events(sse);
  ASSERT_GE(ev.size(), 2u);
  EXPECT_EQ(ev[ev.size() - 2]["type"], "error");
  EXPECT_EQ(ev[ev.size() - 2]["message"], "busy");
  EXPECT_EQ(ev.back()["type"], "response.failed");
  EXPECT_EQ(ev.back()["response"]["status"], "failed");
  EXPECT_EQ(ev.back()["response"]["error"]["message"], "busy");
}
