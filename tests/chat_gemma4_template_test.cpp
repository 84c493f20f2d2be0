// Gemma 4's chat template (shared/fixtures/chat_templates/google-gemma-4-31B-it.jinja, issue #14)
// with tool calls, tool results and thinking in the history, rendered through keel's real prompt
// path: a request parsed by the API (OpenAI or Anthropic), engine/prompt_render (history replay,
// system folding, the role-tagging renderer), exactly what ServedModel::prepare tokenizes.
//
// Expected prompts come from the template's semantics, not from keel: the agent-loop cases are
// transformers' own renderings in shared/fixtures/chat_template_cases/google-gemma-4-31B-it.json
// (extended by hand where stated), the others are derived by hand from the template source, each
// part explained where it is written. The round-trip tests parse a call the way the model writes
// it, put it back into the history the way a client returns it, and check that the template
// writes the very same call text into the next prompt.
#include <gtest/gtest.h>

#include <string>

#include "keel/api/chat_request.h"
#include "keel/engine/prompt_render.h"
#include "keel/toolcall/tool_call_parser.h"
#include "test_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;

// The fixture cases were rendered with these.
constexpr const char* kBos = "<s>";
constexpr const char* kEos = "</s>";

struct Gemma4 {
  std::string source = read_text(shared_dir() / "fixtures/chat_templates/google-gemma-4-31B-it.jinja");
  chat::ChatTemplate tmpl{source, kBos, kEos};
  TemplateReading reading{toolcall::detect_reasoning_control(source), toolcall::detect_tool_call_format(source).format};

  std::string render(const api::ChatRequest& r) const {
    return render_prompt(tmpl, reading, r.messages, r.tools, PromptControls{r.thinking, r.reasoning_effort, r.assistant_prefill})
        .text;
  }
};

const Gemma4& gemma4() {
  static const Gemma4 g;
  return g;
}

const api::RequestLimits kLimits;

const json& fixture_case(const std::string& name) {
  static const json doc =
      json::parse(read_text(shared_dir() / "fixtures/chat_template_cases/google-gemma-4-31B-it.json"));
  for (const json& c : doc.at("cases"))
    if (c.at("name") == name) return c;
  throw std::runtime_error("no fixture case " + name);
}

// The fixture's messages as an OpenAI client sends them: call arguments as JSON strings.
json openai_messages(const json& messages) {
  json out = messages;
  for (json& m : out)
    if (m.contains("tool_calls"))
      for (json& call : m["tool_calls"]) call["function"]["arguments"] = call["function"]["arguments"].dump();
  return out;
}

api::ChatRequest openai_request(const json& messages, const json& tools, const std::string& extra = "") {
  json body = {{"model", "gemma-4"}, {"messages", messages}};
  if (!tools.is_null()) body["tools"] = tools;
  std::string text = body.dump();
  if (!extra.empty()) text = text.substr(0, text.size() - 1) + "," + extra + "}";
  return api::parse_openai_request(text, kLimits);
}

// The same conversation in Anthropic's shape: system on top, calls as tool_use blocks, results as
// tool_result blocks in a user message (arguments as objects), tools with input_schema.
json anthropic_body(const json& messages, const json& tools) {
  json body = {{"model", "gemma-4"}, {"max_tokens", 64}, {"messages", json::array()}};
  json& out = body["messages"];
  for (const json& m : messages) {
    const std::string role = m.at("role");
    if (role == "system") {
      body["system"] = m.at("content");
    } else if (role == "user") {
      out.push_back({{"role", "user"}, {"content", m.at("content")}});
    } else if (role == "assistant") {
      json blocks = json::array();
      if (!m.value("content", "").empty()) blocks.push_back({{"type", "text"}, {"text", m.at("content")}});
      for (const json& call : m.value("tool_calls", json::array())) {
        const json& args = call["function"]["arguments"];
        blocks.push_back({{"type", "tool_use"}, {"id", call.at("id")}, {"name", call["function"]["name"]},
                          {"input", args.is_string() ? json::parse(args.get<std::string>()) : args}});
      }
      out.push_back({{"role", "assistant"}, {"content", blocks}});
    } else if (role == "tool") {
      const json result = {{"type", "tool_result"}, {"tool_use_id", m.at("tool_call_id")}, {"content", m.at("content")}};
      // Consecutive results go into one user message, as Anthropic clients send them.
      if (!out.empty() && out.back()["role"] == "user" && out.back()["content"].is_array())
        out.back()["content"].push_back(result);
      else
        out.push_back({{"role", "user"}, {"content", json::array({result})}});
    }
  }
  if (!tools.is_null()) {
    body["tools"] = json::array();
    for (const json& t : tools)
      body["tools"].push_back({{"name", t["function"]["name"]}, {"description", t["function"]["description"]},
                               {"input_schema", t["function"]["parameters"]}});
  }
  return body;
}

api::ChatRequest anthropic_request(const json& messages, const json& tools) {
  return api::parse_anthropic_request(anthropic_body(messages, tools).dump(), kLimits);
}

TEST(Gemma4Template, ReadsAsGemma4WithAThinkingSwitch) {
  EXPECT_EQ(gemma4().reading.format, toolcall::ToolCallFormat::Gemma4);
  EXPECT_EQ(gemma4().reading.reasoning.kind, toolcall::ReasoningKind::Switchable);
  EXPECT_EQ(gemma4().reading.reasoning.how, "enable_thinking");
}

// The fixture's agent loop in progress (system, user, a call, its result; generation prompt on):
// through both APIs, byte for byte as transformers rendered it.
TEST(Gemma4Template, AgentLoopInProgressMatchesTransformers) {
  const json& c = fixture_case("tool_round_trip_gen");
  const json& ctx = c.at("context");
  ASSERT_EQ(ctx.at("bos_token"), kBos);
  ASSERT_TRUE(ctx.at("add_generation_prompt").get<bool>());
  const std::string want = c.at("expected");
  EXPECT_EQ(gemma4().render(openai_request(openai_messages(ctx.at("messages")), ctx.at("tools"))), want);
  EXPECT_EQ(gemma4().render(anthropic_request(ctx.at("messages"), ctx.at("tools"))), want);
}

// system, user, assistant with a call, its result, assistant with text and two calls, their
// results, the answer, and the next user question. The fixture's tool_round_trip case is this
// history up to the answer, rendered by transformers without a generation prompt; what the next
// user message adds follows from the template:
// - the user message is not a tool message and not a continued model turn, so it opens
//   '<|turn>user\n', writes its content | trim, and closes '<turn|>\n';
// - it is the last user message, but no assistant comes after it, so the reasoning guard changes
//   nothing before it (and there is no reasoning here): the prefix stays transformers' bytes;
// - the generation prompt: prev_message_type is None after a user turn, so '<|turn>model\n', and
//   with enable_thinking false (thinking off) the empty thought '<|channel>thought\n<channel|>'.
TEST(Gemma4Template, FullAgentHistoryThenUserMatchesTheTemplate) {
  const json& c = fixture_case("tool_round_trip");
  const json& ctx = c.at("context");
  ASSERT_FALSE(ctx.at("add_generation_prompt").get<bool>());
  json messages = ctx.at("messages");
  messages.push_back({{"role", "user"}, {"content", "Thanks! Now remove b.py. "}});
  const std::string want = c.at("expected").get<std::string>() +
                           "<|turn>user\nThanks! Now remove b.py.<turn|>\n"
                           "<|turn>model\n<|channel>thought\n<channel|>";
  // What transformers wrote for the middle of it, spelled out: results go inside the model turn
  // right after the calls they answer (named by tool_call_id), the text of a message with calls
  // comes after its results, and the answer continues the same model turn (no second
  // '<|turn>model', since the previous non-tool message is the assistant's).
  ASSERT_NE(want.find("<|tool_call>call:Read{file_path:<|\"|>/etc/hosts<|\"|>}<tool_call|>"
                      "<|tool_call>call:get_weather{city:<|\"|>Oslo<|\"|>,days:[1,2]}<tool_call|>"
                      "<|tool_response>response:Read{value:<|\"|>127.0.0.1 localhost<|\"|>}<tool_response|>"
                      "<|tool_response>response:get_weather{value:<|\"|>{\"temp\": 3}<|\"|>}<tool_response|>"
                      "Reading both.<turn|>\nDone: two files, and it is 3 degrees in Oslo.<turn|>\n"),
            std::string::npos);
  EXPECT_EQ(gemma4().render(openai_request(openai_messages(messages), ctx.at("tools"))), want);
  EXPECT_EQ(gemma4().render(anthropic_request(messages, ctx.at("tools"))), want);
}

// Thinking on, no tools: the system turn holds only '<|think|>\n' (written when enable_thinking
// is true, even with no system message and no tools).
const std::string kThinkingSystem = "<s><|turn>system\n<|think|>\n<turn|>\n";

json thinking_loop() {
  return json::parse(R"([
    {"role":"user","content":"List /tmp."},
    {"role":"assistant","content":"","reasoning_content":"Need the listing.",
     "tool_calls":[{"id":"c1","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"ls /tmp\"}"}}]},
    {"role":"tool","tool_call_id":"c1","content":"a.txt"}])");
}

// Reasoning of the assistant message with calls after the last user message (the agent loop in
// progress) is rendered as '<|channel>thought\n' + reasoning + '\n<channel|>' before its calls.
// The result follows in the same turn, no '<turn|>' closes it (results were written and the
// message has no text), and no generation prompt is added after a tool response: the model goes
// on in the same turn.
TEST(Gemma4Template, ReasoningOfTheLoopInProgressIsRenderedBeforeItsCalls) {
  const std::string want = kThinkingSystem +
                           "<|turn>user\nList /tmp.<turn|>\n"
                           "<|turn>model\n<|channel>thought\nNeed the listing.\n<channel|>"
                           "<|tool_call>call:Bash{command:<|\"|>ls /tmp<|\"|>}<tool_call|>"
                           "<|tool_response>response:Bash{value:<|\"|>a.txt<|\"|>}<tool_response|>";
  EXPECT_EQ(gemma4().render(openai_request(thinking_loop(), nullptr, R"("reasoning_effort":"high")")), want);
  // Anthropic: the thinking block is the reasoning (thinking on with a budget).
  json body = anthropic_body(thinking_loop(), nullptr);
  body["thinking"] = {{"type", "enabled"}, {"budget_tokens", 2048}};
  json& blocks = body["messages"][1]["content"];
  blocks.insert(blocks.begin(), json::object({{"type", "thinking"}, {"thinking", "Need the listing."}, {"signature", "sig"}}));
  EXPECT_EQ(gemma4().render(api::parse_anthropic_request(body.dump(), kLimits)), want);
}

// Once a user message follows, that reasoning is dropped (loop.index0 > last_user_idx fails), as is
// the reasoning of the answer (it has no calls). The answer continues the model turn after the
// result and closes it; the generation prompt with thinking on is '<|turn>model\n' alone.
TEST(Gemma4Template, ReasoningBeforeTheLastUserMessageIsDropped) {
  json messages = thinking_loop();
  messages.push_back({{"role", "assistant"}, {"content", "There is a.txt."}, {"reasoning_content", "Simple."}});
  messages.push_back({{"role", "user"}, {"content", "Thanks."}});
  const std::string want = kThinkingSystem +
                           "<|turn>user\nList /tmp.<turn|>\n"
                           "<|turn>model\n<|tool_call>call:Bash{command:<|\"|>ls /tmp<|\"|>}<tool_call|>"
                           "<|tool_response>response:Bash{value:<|\"|>a.txt<|\"|>}<tool_response|>"
                           "There is a.txt.<turn|>\n"
                           "<|turn>user\nThanks.<turn|>\n"
                           "<|turn>model\n";
  EXPECT_EQ(gemma4().render(openai_request(messages, nullptr, R"("reasoning_effort":"high")")), want);
}

// The model's call, as keel parses it (one call, no problem).
toolcall::ParsedCall parse_call(const std::string& output) {
  toolcall::OutputParserOptions o;
  o.format = toolcall::ToolCallFormat::Gemma4;
  o.reasoning = true;
  auto parser = toolcall::make_output_parser(o);
  std::vector<toolcall::ParseEvent> events;
  parser->feed(output, events);
  parser->finish(events);
  if (events.size() != 1 || events[0].kind != toolcall::ParseEvent::Kind::Call || !events[0].call.problem.empty())
    throw std::runtime_error("not one clean call: " + output);
  return events[0].call;
}

// The prompt of the next turn after the model made `call`: the call returned in history as each
// API returns it (OpenAI: arguments as the JSON string keel streamed; Anthropic: the input object),
// with a result.
std::string next_prompt(const toolcall::ParsedCall& call, api::Protocol protocol) {
  const json tools = json::parse(R"([{"type":"function","function":{"name":")" + call.name +
                                 R"(","description":"d","parameters":{"type":"object","properties":{}}}}])");
  json messages = json::array();
  messages.push_back({{"role", "user"}, {"content", "Go."}});
  messages.push_back({{"role", "assistant"},
                      {"content", ""},
                      {"tool_calls", json::array({{{"id", "c1"},
                                                   {"type", "function"},
                                                   {"function", {{"name", call.name}, {"arguments", call.arguments}}}}})}});
  messages.push_back({{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "done"}});
  if (protocol == api::Protocol::Anthropic) return gemma4().render(anthropic_request(messages, tools));
  return gemma4().render(openai_request(openai_messages(messages), tools));
}

// What the template writes for a call: keys sorted at every level (dictsort), bare, with no
// spaces; strings between <|"|> unescaped; numbers as Python prints them; booleans as true/false.
// A call the model writes that way comes back byte for byte.
TEST(Gemma4Template, AModelCallRendersBackAsTheModelWroteIt) {
  const std::string emitted =
      "<|tool_call>call:Edit{edits:[{new:<|\"|>if (x) {\n  say(\"hi\");\n}<|\"|>,old:<|\"|>if(x){}<|\"|>}],"
      "options:{dry_run:false,lines:3,ratio:-1.5,tags:[<|\"|><b>, c<|\"|>,<|\"|><|\"|>]},path:<|\"|>src/main.c<|\"|>}"
      "<tool_call|>";
  const toolcall::ParsedCall call = parse_call(emitted);
  EXPECT_EQ(call.raw, emitted);
  for (api::Protocol p : {api::Protocol::OpenAI, api::Protocol::Anthropic}) {
    const std::string prompt = next_prompt(call, p);
    EXPECT_NE(prompt.find("<|turn>model\n" + emitted + "<|tool_response>response:Edit{value:<|\"|>done<|\"|>}"),
              std::string::npos)
        << prompt;
  }
}

// What the template normalizes: key order (sorted), whitespace between tokens, JSON-quoted
// strings (written back between <|"|>), number spellings (1e5 is the float 100000.0, printed as
// Python prints it), and null, which Python prints as None (read back as the string "None": the one
// lossy value).
TEST(Gemma4Template, ACallRendersBackInTheTemplatesNormalForm) {
  const std::string emitted =
      "<|tool_call>call:Bash{ timeout: 30, command: \"ls \\\"a b\\\"\", env: {B: null, A: true}, n: 1e5 }<tool_call|>";
  const toolcall::ParsedCall call = parse_call(emitted);
  EXPECT_EQ(call.arguments, json::parse(R"({"timeout":30,"command":"ls \"a b\"","env":{"B":null,"A":true},"n":1e5})"));
  const std::string normal =
      "<|tool_call>call:Bash{command:<|\"|>ls \"a b\"<|\"|>,env:{A:true,B:None},n:100000.0,timeout:30}<tool_call|>";
  for (api::Protocol p : {api::Protocol::OpenAI, api::Protocol::Anthropic})
    EXPECT_NE(next_prompt(call, p).find(normal), std::string::npos) << next_prompt(call, p);
  // The normal form parses to the same arguments but for null.
  EXPECT_EQ(parse_call(normal).arguments, json::parse(R"({"command":"ls \"a b\"","env":{"A":true,"B":"None"},"n":1e5,"timeout":30})"));
}

}  // namespace
}  // namespace keel::test
