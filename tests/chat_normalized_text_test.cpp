// Text that the tokenizer's normalizer changes (a decomposed "e\u0301" that NFC composes, U+212B,
// Hangul jamo, "\u2581" that a SentencePiece decoder turns into a space) still gets a role for
// every token: in the system text, the user's, a tool call's arguments and a tool result, on every
// fixture tokenizer, with its own chat template.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "keel/chat/chat_renderer.h"
#include "keel/chat/token_roles.h"
#include "keel/text/tokenizer.h"
#include "keel/text/unicode_normalization.h"
#include "test_support.h"

namespace keel::chat {
namespace {

using json = nlohmann::ordered_json;

// Each changes under NFC or NFKC, or under a SentencePiece decoder.
const std::vector<std::string> kChangingTexts = {
    "cafe\u0301",                       // NFD e + combining acute, as macOS writes file names
    "Re\u0301sume\u0301.pdf",           // the same inside a file name
    "\u212B ngstr\u00F6m",              // ANGSTROM SIGN -> A with ring
    "\u1FD3",                           // Greek iota with dialytika and oxia -> U+0390
    "\u1100\u1161\u11A8 \uAC00\u11A8",  // Hangul jamo -> a syllable; LV syllable + T jamo
    "a\u0307\u0323 e\u0301\u0301\u0301",  // marks out of canonical order; stacked marks
    "\u0301 starts with a mark",
    "\uFB01le \uFF21 \u2460 x\u00B2",   // NFKC-only changes: ligature, fullwidth, circled, superscript
    "\u2581\u2581 block",               // SentencePiece's meta space written by a client
    "\U0001F469\u200D\U0001F4BB \u65E5\u672C\u8A9E\u306E\u30C6\u30AD\u30B9\u30C8",
};

json conversation(const std::string& odd, bool with_tools) {
  json m = json::array();
  m.push_back({{"role", "system"}, {"content", odd + " sysmark " + odd}});
  m.push_back({{"role", "user"}, {"content", odd + " usermark " + odd}});
  if (with_tools) {
    json call = {{"id", "call_1"}, {"type", "function"},
                 {"function", {{"name", "Bash"}, {"arguments", json{{"command", "ls " + odd + " callmark"}}.dump()}}}};
    m.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array({call})}});
    m.push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"name", "Bash"}, {"content", odd + "\nresultmark " + odd}});
  } else {
    m.push_back({{"role", "assistant"}, {"content", odd + " answermark"}});
    m.push_back({{"role", "user"}, {"content", odd + " lastmark"}});
  }
  return m;
}

const json kTools = json::parse(R"([{"type": "function", "function": {"name": "Bash",
  "description": "Run a command.",
  "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}])");

// Every string in `j`, normalized.
json normalized(const json& j, text::NormalizationForm form) {
  if (j.is_string()) return text::normalize_unicode(j.get<std::string>(), form);
  json out = j;
  if (j.is_structured())
    for (auto it = out.begin(); it != out.end(); ++it) *it = normalized(*it, form);
  return out;
}

struct Encoded {
  std::vector<int32_t> ids;
  std::vector<Role> roles;
  std::string text;
};

Encoded encode(const ChatTemplate& tmpl, const text::Tokenizer& tok, const json& messages, const json& tools) {
  const RenderedPrompt p = tmpl.render(messages, tools, json{{"add_generation_prompt", true}});
  Encoded e{encode_rendered_prompt(tok, p.text, p.spans), {}, p.text};
  e.roles = token_roles(tok, e.ids, p.text, p.spans);
  return e;
}

// The decoded bytes of the tokens that carry `role`.
std::string text_of_role(const text::Tokenizer& tok, const Encoded& e, Role role) {
  std::string out;
  text::Decoder::State state;
  for (size_t i = 0; i < e.ids.size(); ++i) {
    const std::string piece = tok.decode_token_bytes(e.ids[i], state);
    if (e.roles[i] == role) out += piece;
  }
  return out;
}

struct Case {
  const char* name;
  std::string template_file;
  std::string tokenizer_dir;
  std::string bos;
  bool tools;
  bool nfc;  // the tokenizer normalizes to NFC
};

std::vector<Case> cases() {
  return {{"qwen2.5", "Qwen-Qwen2.5-7B-Instruct.jinja", "qwen2.5", "", true, true},
          {"qwen3", "Qwen-Qwen3-0.6B.jinja", "qwen3", "", true, true},
          {"llama3.1", "meta-llama-Llama-3.1-8B-Instruct.jinja", "llama3.1", "<|begin_of_text|>", true, false},
          {"gemma3", "google-gemma-3-it.jinja", "gemma3", "<bos>", false, false}};
}

TEST(ChatNormalizedText, EveryTokenKeepsItsRoleOnEveryFixtureTokenizer) {
  const auto fixtures = test::shared_dir() / "fixtures";
  for (const Case& c : cases()) {
    const ChatTemplate tmpl(test::read_text(fixtures / "chat_templates" / c.template_file), c.bos, "");
    const auto tok = text::Tokenizer::from_file(fixtures / "tokenizers" / c.tokenizer_dir);
    const json tools = c.tools ? kTools : json(nullptr);
    for (const std::string& odd : kChangingTexts) {
      SCOPED_TRACE(std::string(c.name) + ": " + odd);
      const json messages = conversation(odd, c.tools);
      Encoded e;
      ASSERT_NO_THROW(e = encode(tmpl, tok, messages, tools));
      ASSERT_EQ(e.roles.size(), e.ids.size());
      EXPECT_NE(text_of_role(tok, e, Role::system).find("sysmark"), std::string::npos);
      EXPECT_NE(text_of_role(tok, e, Role::user).find("usermark"), std::string::npos);
      if (c.tools) {
        EXPECT_NE(text_of_role(tok, e, Role::tool_call).find("callmark"), std::string::npos);
        EXPECT_NE(text_of_role(tok, e, Role::tool_result).find("resultmark"), std::string::npos);
        EXPECT_NE(text_of_role(tok, e, Role::tools).find("Run a command."), std::string::npos);
      }
      if (!c.nfc) continue;
      // The tokenizer reads the text as its NFC form: the same tokens, with the same roles, as
      // when the client had sent that form.
      const Encoded nfc = encode(tmpl, tok, normalized(messages, text::NormalizationForm::NFC), tools);
      EXPECT_EQ(e.ids, nfc.ids);
      EXPECT_EQ(e.roles, nfc.roles);
    }
  }
}

TEST(ChatNormalizedText, AlreadyNormalizedInputsOfEveryFormKeepTheirRoles) {
  const auto fixtures = test::shared_dir() / "fixtures";
  const ChatTemplate tmpl(test::read_text(fixtures / "chat_templates/Qwen-Qwen3-0.6B.jinja"));
  const auto tok = text::Tokenizer::from_file(fixtures / "tokenizers/qwen3");
  for (const std::string& odd : kChangingTexts)
    for (auto form : {text::NormalizationForm::NFC, text::NormalizationForm::NFD, text::NormalizationForm::NFKC,
                      text::NormalizationForm::NFKD}) {
      const json messages = normalized(conversation(odd, true), form);
      const Encoded e = encode(tmpl, tok, messages, kTools);
      const Encoded nfc = encode(tmpl, tok, normalized(messages, text::NormalizationForm::NFC), kTools);
      EXPECT_EQ(e.ids, nfc.ids) << odd;
      EXPECT_EQ(e.roles, nfc.roles) << odd;
    }
}

TEST(ChatNormalizedText, TokensOfOtherTextStillGetOneRoleEach) {
  // ids that do not spell the text at all (a caller's bug) fall back to a coarse alignment
  // instead of failing the request: one role per token, the common prefix exact.
  const auto tok = text::Tokenizer::from_file(test::shared_dir() / "models/tiny-toolcaller");
  const std::string text = "hello there";
  const std::vector<RoleSpan> spans = {{0, 6, Role::system}, {6, text.size(), Role::user}};
  const std::vector<int32_t> ids = tok.encode("hello world, and more");
  const std::vector<Role> roles = token_roles(tok, ids, text, spans);
  ASSERT_EQ(roles.size(), ids.size());
  EXPECT_EQ(roles.front(), Role::system);
}

}  // namespace
}  // namespace keel::chat
