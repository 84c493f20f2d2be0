// Role spans: for tiny-toolcaller's template and three other families (Llama 3.x, Qwen3,
// Mistral), tool schemas land in `tools`, tool results in `tool_result`, earlier calls in
// `tool_call`, and every byte of the prompt has exactly one role.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "keel/chat/chat_renderer.h"
#include "keel/util/error.h"
#include "test_support.h"

namespace {

using json = nlohmann::ordered_json;
using keel::chat::Role;

json conversation() {
  return json::parse(R"([
    {"role": "system", "content": "You are a careful coding agent."},
    {"role": "user", "content": "List the files in /tmp please."},
    {"role": "assistant", "content": "", "tool_calls": [
      {"id": "abcDEF123", "type": "function",
       "function": {"name": "Bash", "arguments": "{\"command\": \"ls /tmp\"}"}}]},
    {"role": "tool", "tool_call_id": "abcDEF123", "name": "Bash", "content": "alpha.txt\nbeta.py"}
  ])");
}

json tools() {
  return json::parse(R"([
    {"type": "function", "function": {
      "name": "Bash", "description": "Execute a bash command and return output.",
      "parameters": {"type": "object",
                     "properties": {"command": {"type": "string", "description": "The bash command to execute"}},
                     "required": ["command"]}}}
  ])");
}

keel::chat::ChatTemplate fixture_template(const std::string& name) {
  return keel::chat::ChatTemplate(keel::test::read_text(keel::test::shared_dir() / "fixtures/chat_templates" / name),
                                  "<s>", "</s>");
}

// Every byte of `needle`'s occurrence (the `nth`, counting from 0) has role `want`.
void expect_role(const keel::chat::RenderedPrompt& p, const std::string& needle, Role want, int nth = 0) {
  size_t pos = p.text.find(needle);
  for (int i = 0; i < nth && pos != std::string::npos; ++i) pos = p.text.find(needle, pos + 1);
  ASSERT_NE(pos, std::string::npos) << "'" << needle << "' not in prompt:\n" << p.text;
  for (const auto& s : p.spans) {
    if (s.end <= pos || s.begin >= pos + needle.size()) continue;
    EXPECT_EQ(keel::chat::role_name(s.role), keel::chat::role_name(want))
        << "'" << needle << "' overlaps a " << keel::chat::role_name(s.role) << " span: "
        << p.text.substr(s.begin, s.end - s.begin);
  }
}

void expect_well_formed(const keel::chat::RenderedPrompt& p) {
  ASSERT_FALSE(p.spans.empty());
  EXPECT_EQ(p.spans.front().begin, 0u);
  EXPECT_EQ(p.spans.back().end, p.text.size());
  for (size_t i = 0; i < p.spans.size(); ++i) {
    EXPECT_LT(p.spans[i].begin, p.spans[i].end);
    if (i) {
      EXPECT_EQ(p.spans[i].begin, p.spans[i - 1].end);
      EXPECT_NE(p.spans[i].role, p.spans[i - 1].role);
    }
  }
}

// The checks every family must pass; `call_marker` is text the template puts just before the
// earlier call, so the tool name found after it is the call's, not the schema's.
void check_family(const keel::chat::ChatTemplate& t, const std::string& call_marker, bool shows_system = true) {
  auto p = t.render(conversation(), tools(), json{{"add_generation_prompt", true}});
  expect_well_formed(p);
  expect_role(p, "Execute a bash command and return output.", Role::tools);
  expect_role(p, "The bash command to execute", Role::tools);
  if (shows_system) expect_role(p, "You are a careful coding agent.", Role::system);
  expect_role(p, "List the files in /tmp please.", Role::user);
  expect_role(p, "ls /tmp", Role::tool_call);
  expect_role(p, "alpha.txt", Role::tool_result);
  expect_role(p, "beta.py", Role::tool_result);
  size_t marker = p.text.find(call_marker);
  ASSERT_NE(marker, std::string::npos) << p.text;
  size_t name = p.text.find("Bash", marker);
  ASSERT_NE(name, std::string::npos);
  EXPECT_EQ(keel::chat::role_of_range(p.spans, name, name + 4), Role::tool_call);
  EXPECT_EQ(p.spans.back().role, Role::scaffolding) << "the generation prompt is scaffolding";
}

}  // namespace

TEST(ChatRoles, TinyToolcallerTemplate) {
  auto src = keel::chat::load_chat_template_source(keel::test::shared_dir() / "models/tiny-toolcaller");
  keel::chat::ChatTemplate t(src.source, src.bos_token, src.eos_token);
  check_family(t, "<|im_start|>assistant");
  auto p = t.render(conversation(), tools(), json{{"add_generation_prompt", true}});
  expect_role(p, "<|im_start|>", Role::scaffolding);
  expect_role(p, "<tool_response>", Role::scaffolding);
}

TEST(ChatRoles, Llama3Family) { check_family(fixture_template("meta-llama-Llama-3.1-8B-Instruct.jinja"), "<|start_header_id|>assistant"); }

TEST(ChatRoles, Qwen3Family) { check_family(fixture_template("Qwen-Qwen3-0.6B.jinja"), "<|im_start|>assistant"); }

TEST(ChatRoles, MistralFamily) {
  // Mistral puts the system prompt into the last user turn only, which this conversation's is not.
  check_family(fixture_template("mistralai-Mistral-Nemo-Instruct-2407.jinja"), "[TOOL_CALLS]", false);
  auto p = fixture_template("mistralai-Mistral-Nemo-Instruct-2407.jinja")
               .render(conversation(), tools(), json{{"add_generation_prompt", true}});
  expect_role(p, "abcDEF123", Role::tool_call);  // the id inside the call
}

TEST(ChatRoles, ReasoningAndAssistantText) {
  auto t = fixture_template("Qwen-Qwen3-0.6B.jinja");
  json messages = json::parse(R"([
    {"role": "user", "content": "2+2?"},
    {"role": "assistant", "content": "The answer is 4.", "reasoning_content": "Adding two and two."},
    {"role": "user", "content": "Thanks"}
  ])");
  // Qwen3 keeps reasoning only after the last user turn; put the assistant turn last.
  messages.erase(messages.end() - 1);
  auto p = t.render(messages, nullptr, json{{"add_generation_prompt", false}});
  expect_well_formed(p);
  expect_role(p, "The answer is 4.", Role::assistant);
  expect_role(p, "Adding two and two.", Role::reasoning);
  expect_role(p, "2+2?", Role::user);
}

TEST(ChatRoles, RoleOfRangePrefersContent) {
  std::vector<keel::chat::RoleSpan> spans = {{0, 5, Role::scaffolding}, {5, 10, Role::user}, {10, 12, Role::scaffolding}};
  EXPECT_EQ(keel::chat::role_of_range(spans, 0, 5), Role::scaffolding);
  EXPECT_EQ(keel::chat::role_of_range(spans, 3, 7), Role::user);
  EXPECT_EQ(keel::chat::role_of_range(spans, 9, 12), Role::user);
}

TEST(ChatRoles, ArgumentKeyOrderIsKept) {
  keel::chat::ChatTemplate t("{% for m in messages %}{{ m.tool_calls[0].function.arguments | tojson }}{% endfor %}");
  json messages = json::parse(R"([{"role": "assistant", "content": "", "tool_calls": [
      {"type": "function", "function": {"name": "f", "arguments": "{\"z\": 1, \"a\": {\"y\": 2, \"b\": 3}}"}}]}])");
  EXPECT_EQ(t.render(messages, nullptr, json::object()).text, R"({"z": 1, "a": {"y": 2, "b": 3}})");
}
