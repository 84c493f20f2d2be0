// gpt-oss prompts through the real template (shared/fixtures/chat_templates/openai-gpt-oss-120b.jinja):
// what keel reads from the template (effort variable, the field earlier reasoning goes in), how a
// request's thinking and effort fields become its "Reasoning:" system line, and how an agent loop
// with earlier thinking and tool calls replays into the prompt without the template raising.
// Rendering goes through engine/prompt_render, the same call ServedModel::prepare makes before it
// tokenizes (no gpt-oss weights or tokenizer.json are needed to check the text and its roles).
#include <gtest/gtest.h>

#include <string>

#include "keel/api/chat_request.h"
#include "keel/engine/history_replay.h"
#include "keel/engine/prompt_render.h"
#include "test_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;

std::string template_source(const std::string& file) {
  return read_text(shared_dir() / "fixtures" / "chat_templates" / file);
}

TemplateReading reading_of(const std::string& source) {
  return {toolcall::detect_reasoning_control(source), toolcall::detect_tool_call_format(source).format};
}

struct GptOss {
  std::string source = template_source("openai-gpt-oss-120b.jinja");
  chat::ChatTemplate tmpl{source, "<|startoftext|>", "<|return|>"};
  TemplateReading reading = reading_of(source);

  chat::RenderedPrompt render(const api::ChatRequest& r) const {
    return render_prompt(tmpl, reading, r.messages, r.tools,
                         PromptControls{r.thinking, r.reasoning_effort, r.assistant_prefill});
  }
};

const GptOss& gpt_oss() {
  static const GptOss g;
  return g;
}

const api::RequestLimits kLimits;

api::ChatRequest anthropic(const std::string& extra, const std::string& messages = R"([{"role":"user","content":"Hi"}])") {
  return api::parse_anthropic_request(R"({"model":"m","max_tokens":64,"messages":)" + messages + extra + "}", kLimits);
}

api::ChatRequest openai(const std::string& extra, const std::string& messages = R"([{"role":"user","content":"Hi"}])") {
  return api::parse_openai_request(R"({"model":"m","messages":)" + messages + extra + "}", kLimits);
}

// The text of the "Reasoning:" line of the rendered system message.
std::string reasoning_line(const chat::RenderedPrompt& p) {
  const size_t at = p.text.find("Reasoning: ");
  if (at == std::string::npos) return "(none)";
  return p.text.substr(at, p.text.find('\n', at) - at);
}

// The role of every byte of `needle` in the prompt (it must occur once), or "mixed".
std::string role_of(const chat::RenderedPrompt& p, const std::string& needle) {
  const size_t at = p.text.find(needle);
  if (at == std::string::npos || p.text.find(needle, at + 1) != std::string::npos) return "not found once";
  std::string role;
  for (const auto& s : p.spans) {
    if (s.end <= at || s.begin >= at + needle.size()) continue;
    const std::string r(chat::role_name(s.role));
    if (!role.empty() && role != r) return "mixed";
    role = r;
  }
  return role;
}

TEST(HarmonyPrompt, TemplateReadings) {
  const TemplateReading oss = gpt_oss().reading;
  EXPECT_EQ(oss.format, toolcall::ToolCallFormat::Harmony);
  EXPECT_EQ(oss.reasoning.kind, toolcall::ReasoningKind::AlwaysOn);
  EXPECT_TRUE(oss.reasoning.reads_effort);
  EXPECT_EQ(oss.reasoning.history_field, "thinking");

  const TemplateReading qwen3 = reading_of(template_source("Qwen-Qwen3-0.6B.jinja"));
  EXPECT_FALSE(qwen3.reasoning.reads_effort);
  EXPECT_EQ(qwen3.reasoning.history_field, "reasoning_content");
  EXPECT_EQ(reading_of(template_source("LFM2.5-8B-A1B.jinja")).reasoning.history_field, "thinking");
  EXPECT_TRUE(reading_of(template_source("upstage-Solar-Open-100B.jinja")).reasoning.reads_effort);
}

TEST(HarmonyPrompt, NothingSaidLeavesTheTemplateDefault) {
  EXPECT_FALSE(anthropic("").reasoning_effort.has_value());
  EXPECT_FALSE(openai("").reasoning_effort.has_value());
  EXPECT_EQ(template_kwargs(gpt_oss().reading, PromptControls{}), json::parse(R"({"add_generation_prompt":true})"));
  EXPECT_EQ(reasoning_line(gpt_oss().render(anthropic(""))), "Reasoning: medium");
  EXPECT_EQ(reasoning_line(gpt_oss().render(openai(""))), "Reasoning: medium");
}

TEST(HarmonyPrompt, OpenAIReasoningEffortSetsTheLevel) {
  const std::pair<const char*, const char*> cases[] = {
      {"none", "low"}, {"minimal", "low"}, {"low", "low"}, {"medium", "medium"}, {"high", "high"}, {"xhigh", "high"}};
  for (const auto& [effort, level] : cases) {
    const api::ChatRequest r = openai(std::string(R"(,"reasoning_effort":")") + effort + "\"");
    EXPECT_EQ(reasoning_line(gpt_oss().render(r)), std::string("Reasoning: ") + level) << effort;
  }
  // "none" still turns thinking off for templates that can (enable_thinking false).
  EXPECT_FALSE(openai(R"(,"reasoning_effort":"none")").thinking);
  // A word keel does not know leaves the default rather than reaching the prompt.
  EXPECT_EQ(reasoning_line(gpt_oss().render(openai(R"(,"reasoning_effort":"turbo")"))), "Reasoning: medium");
}

TEST(HarmonyPrompt, AnthropicThinkingAndEffortSetTheLevel) {
  const std::pair<const char*, const char*> cases[] = {
      {R"(,"thinking":{"type":"disabled"})", "low"},
      {R"(,"thinking":{"type":"enabled","budget_tokens":1024})", "low"},
      {R"(,"thinking":{"type":"enabled","budget_tokens":4095})", "low"},
      {R"(,"thinking":{"type":"enabled","budget_tokens":4096})", "medium"},
      {R"(,"thinking":{"type":"enabled","budget_tokens":10000})", "medium"},
      {R"(,"thinking":{"type":"enabled","budget_tokens":16384})", "high"},
      {R"(,"thinking":{"type":"enabled","budget_tokens":31999})", "high"},
      {R"(,"thinking":{"type":"adaptive"})", "medium"},  // no effort given: the template's default
      {R"(,"thinking":{"type":"adaptive"},"output_config":{"effort":"low"})", "low"},
      {R"(,"thinking":{"type":"enabled","budget_tokens":31999},"output_config":{"effort":"low"})", "low"},
      {R"(,"thinking":{"type":"disabled"},"output_config":{"effort":"high"})", "high"},
      {R"(,"output_config":{"effort":"max"})", "high"},
  };
  for (const auto& [extra, level] : cases)
    EXPECT_EQ(reasoning_line(gpt_oss().render(anthropic(extra))), std::string("Reasoning: ") + level) << extra;
}

TEST(HarmonyPrompt, TemplatesWithoutTheVariableNeverGetIt) {
  const TemplateReading qwen3 = reading_of(template_source("Qwen-Qwen3-0.6B.jinja"));
  const json kwargs = template_kwargs(qwen3, PromptControls{true, "high", false});
  EXPECT_FALSE(kwargs.contains("reasoning_effort")) << kwargs.dump();
  EXPECT_EQ(kwargs.value("enable_thinking", false), true);
  // gpt-oss has no switch: enable_thinking is never passed to it.
  EXPECT_FALSE(template_kwargs(gpt_oss().reading, PromptControls{true, "low", false}).contains("enable_thinking"));
}

// An Anthropic agent loop: an earlier tool call with thinking, its result, a final answer, then a
// new question whose tool call (thinking, a preamble and the call) has just been answered.
const char* const kAgentLoop = R"([
  {"role":"user","content":"What is in /tmp?"},
  {"role":"assistant","content":[{"type":"thinking","thinking":"Old plan.","signature":""},
    {"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls /tmp"}}]},
  {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"a.txt"}]},
  {"role":"assistant","content":[{"type":"thinking","thinking":"Answer now.","signature":""},
    {"type":"text","text":"There is a.txt."}]},
  {"role":"user","content":"And in /var?"},
  {"role":"assistant","content":[{"type":"thinking","thinking":"List /var.","signature":""},
    {"type":"text","text":"Checking /var."},
    {"type":"tool_use","id":"t2","name":"Bash","input":{"command":"ls /var"}}]},
  {"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","content":"log"}]}
])";

const char* const kBashTool =
    R"(,"tools":[{"name":"Bash","description":"Run a command","input_schema":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}])";

TEST(HarmonyPrompt, AgentLoopReplaysTheCurrentThinkingWhereTheTemplatePutsIt) {
  const chat::RenderedPrompt p = gpt_oss().render(anthropic(kBashTool, kAgentLoop));
  // The open loop: its thinking and preamble become the one analysis message before the call (the
  // template raises for a call message with both), then the call, its result, the generation prompt.
  const std::string tail =
      "<|start|>user<|message|>And in /var?<|end|>"
      "<|start|>assistant<|channel|>analysis<|message|>List /var.\n\nChecking /var.<|end|>"
      "<|start|>assistant to=functions.Bash<|channel|>commentary json<|message|>{\"command\": \"ls /var\"}<|call|>"
      "<|start|>functions.Bash to=assistant<|channel|>commentary<|message|>\"log\"<|end|>"
      "<|start|>assistant";
  ASSERT_TRUE(p.text.ends_with(tail)) << p.text;
  EXPECT_EQ(role_of(p, "List /var.\n\nChecking /var."), "reasoning");
  // A loop closed by a final answer: the template drops its thinking, keeps the call and answer.
  EXPECT_EQ(p.text.find("Old plan."), std::string::npos) << p.text;
  EXPECT_EQ(p.text.find("Answer now."), std::string::npos) << p.text;
  EXPECT_NE(p.text.find("<|start|>assistant to=functions.Bash<|channel|>commentary json<|message|>{\"command\": \"ls /tmp\"}"
                        "<|call|><|start|>functions.Bash to=assistant<|channel|>commentary<|message|>\"a.txt\"<|end|>"
                        "<|start|>assistant<|channel|>final<|message|>There is a.txt.<|end|>"),
            std::string::npos)
      << p.text;
}

TEST(HarmonyPrompt, OpenAIReasoningContentReplaysAsThinking) {
  const char* const messages = R"([
    {"role":"user","content":"What is in /var?"},
    {"role":"assistant","content":null,"reasoning_content":"List /var.","tool_calls":[
      {"id":"c1","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"ls /var\"}"}}]},
    {"role":"tool","tool_call_id":"c1","content":"log"}
  ])";
  const chat::RenderedPrompt p = gpt_oss().render(openai(
      R"(,"tools":[{"type":"function","function":{"name":"Bash","description":"Run","parameters":{"type":"object"}}}])", messages));
  EXPECT_NE(p.text.find("<|start|>assistant<|channel|>analysis<|message|>List /var.<|end|>"
                        "<|start|>assistant to=functions.Bash<|channel|>commentary json<|message|>"),
            std::string::npos)
      << p.text;
  EXPECT_EQ(role_of(p, "List /var."), "reasoning");
}

TEST(HarmonyPrompt, ParallelCallsRenderOneCallPerMessageEachWithItsResult) {
  // The template renders only tool_calls[0] and names a result after the latest call; the results
  // here arrive in the other order.
  const char* const messages = R"([
    {"role":"user","content":"Where am I, and what is here?"},
    {"role":"assistant","content":"","reasoning_content":"Both at once.","tool_calls":[
      {"id":"a","type":"function","function":{"name":"Pwd","arguments":"{}"}},
      {"id":"b","type":"function","function":{"name":"Ls","arguments":"{\"path\":\".\"}"}}]},
    {"role":"tool","tool_call_id":"b","content":"x.txt"},
    {"role":"tool","tool_call_id":"a","content":"/home"}
  ])";
  const chat::RenderedPrompt p = gpt_oss().render(openai(
      R"(,"tools":[{"type":"function","function":{"name":"Pwd","description":"Where","parameters":{"type":"object"}}},)"
      R"({"type":"function","function":{"name":"Ls","description":"List","parameters":{"type":"object"}}}])",
      messages));
  const std::string tail =
      "<|start|>assistant<|channel|>analysis<|message|>Both at once.<|end|>"
      "<|start|>assistant to=functions.Pwd<|channel|>commentary json<|message|>{}<|call|>"
      "<|start|>functions.Pwd to=assistant<|channel|>commentary<|message|>\"/home\"<|end|>"
      "<|start|>assistant to=functions.Ls<|channel|>commentary json<|message|>{\"path\": \".\"}<|call|>"
      "<|start|>functions.Ls to=assistant<|channel|>commentary<|message|>\"x.txt\"<|end|>"
      "<|start|>assistant";
  EXPECT_TRUE(p.text.ends_with(tail)) << p.text;
}

TEST(HarmonyPrompt, OtherTemplatesKeepReasoningContentAndEveryCall) {
  const json messages = json::parse(R"([
    {"role":"assistant","content":"hi","reasoning_content":"r","tool_calls":[{"id":"a"},{"id":"b"}]},
    {"role":"tool","tool_call_id":"b","content":"1"}])");
  const TemplateReading qwen3 = reading_of(template_source("Qwen-Qwen3-0.6B.jinja"));
  EXPECT_EQ(replay_history(messages, qwen3.reasoning, qwen3.format), messages);
}

}  // namespace
}  // namespace keel::test
