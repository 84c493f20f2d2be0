// Roles reach the tokens: render a tool-calling conversation, encode it with the model's own
// tokenizer, and check which role the tokens of the tool schema, the earlier call and the tool
// result carry (tiny-toolcaller, plus the Qwen3 and Llama 3.1 tokenizers with their templates).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "keel/chat/chat_renderer.h"
#include "keel/chat/token_roles.h"
#include "keel/text/tokenizer.h"
#include "test_support.h"

namespace keel::chat {
namespace {

using json = nlohmann::ordered_json;

const json kMessages = json::parse(R"([
  {"role": "system", "content": "You are a careful coding agent."},
  {"role": "user", "content": "List the files in /tmp please."},
  {"role": "assistant", "content": "", "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "Bash", "arguments": "{\"command\": \"ls /tmp\"}"}}]},
  {"role": "tool", "tool_call_id": "call_1", "name": "Bash", "content": "alpha.txt\nbeta.py"}
])");

const json kTools = json::parse(R"([{"type": "function", "function": {"name": "Bash",
  "description": "Execute a bash command and return output.",
  "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}])");

// The role of the token that holds the first byte of `needle` (searching from `from`).
Role role_at(const std::string& text, const std::vector<Role>& roles, const text::Tokenizer& tok,
             const std::vector<int32_t>& ids, const std::string& needle, size_t from = 0) {
  const size_t pos = text.find(needle, from);
  EXPECT_NE(pos, std::string::npos) << needle;
  text::Decoder::State state;
  size_t offset = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    offset += tok.decode_token_bytes(ids[i], state).size();
    if (offset > pos) return roles[i];
  }
  return Role::scaffolding;
}

void check(const ChatTemplate& tmpl, const text::Tokenizer& tok, const std::string& call_marker) {
  const RenderedPrompt p = tmpl.render(kMessages, kTools, json{{"add_generation_prompt", true}});
  const std::vector<int32_t> ids = tok.encode(p.text);
  const std::vector<Role> roles = token_roles(tok, ids, p.text, p.spans);
  ASSERT_EQ(roles.size(), ids.size());
  auto role = [&](const std::string& needle, size_t from = 0) { return role_name(role_at(p.text, roles, tok, ids, needle, from)); };
  EXPECT_EQ(role("Execute a bash"), "tools");
  EXPECT_EQ(role("careful coding"), "system");
  EXPECT_EQ(role("List the files"), "user");
  EXPECT_EQ(role("ls /tmp", p.text.find(call_marker)), "tool_call");
  EXPECT_EQ(role("alpha"), "tool_result");
  EXPECT_EQ(roles.front(), Role::scaffolding);  // the template's opening marker
  size_t counts[kRoleCount] = {};
  for (Role r : roles) ++counts[static_cast<size_t>(r)];
  EXPECT_GT(counts[static_cast<size_t>(Role::tools)], 10u);
}

TEST(ChatTokenRoles, TinyToolcaller) {
  const auto dir = test::shared_dir() / "models/tiny-toolcaller";
  const auto src = load_chat_template_source(dir);
  check(ChatTemplate(src.source, src.bos_token, src.eos_token), text::Tokenizer::from_file(dir), "<tool_call>");
}

TEST(ChatTokenRoles, Qwen3AndLlama31) {
  const auto fixtures = test::shared_dir() / "fixtures";
  check(ChatTemplate(test::read_text(fixtures / "chat_templates/Qwen-Qwen3-0.6B.jinja")),
        text::Tokenizer::from_file(fixtures / "tokenizers/qwen3"), "<tool_call>");
  check(ChatTemplate(test::read_text(fixtures / "chat_templates/meta-llama-Llama-3.1-8B-Instruct.jinja"), "<|begin_of_text|>"),
        text::Tokenizer::from_file(fixtures / "tokenizers/llama3.1"), "\"name\": \"Bash\", \"parameters\"");
}

}  // namespace
}  // namespace keel::chat
