// System messages in the middle of a conversation (chat/system_fold.h): the fold rules, every fixture
// template rendering them (in place or folded), the folded text keeping its system role, and the
// Anthropic request path down to tiny-toolcaller's prompt.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "keel/api/chat_request.h"
#include "keel/chat/chat_renderer.h"
#include "keel/chat/system_fold.h"
#include "keel/chat/token_roles.h"
#include "keel/engine/served_model.h"
#include "keel/util/error.h"
#include "server_support.h"
#include "test_support.h"

namespace keel::chat {
namespace {

using json = nlohmann::ordered_json;

std::tm fixture_clock() { return keel::test::utc_time(2026, 3, 14, 9, 26, 53); }

json msg(const std::string& role, const std::string& content) { return {{"role", role}, {"content", content}}; }

std::string block(const std::string& text) {
  return std::string(kFoldedSystemOpen) + text + std::string(kFoldedSystemClose);
}
const std::string kSep(kFoldedSystemSeparator);

// The role of every byte of [begin, end) of a rendered prompt, when they all share one; else nullopt.
std::optional<Role> role_of_bytes(const RenderedPrompt& p, size_t begin, size_t end) {
  std::optional<Role> role;
  for (const auto& s : p.spans) {
    if (s.end <= begin || s.begin >= end) continue;
    if (role && *role != s.role) return std::nullopt;
    role = s.role;
  }
  return role;
}

// ---- the fold rules ----

TEST(ChatSystemFold, NextUserMessageGetsTheBlockFirst) {
  const json messages = json::array({msg("system", "S0"), msg("user", "U0"), msg("assistant", "A0"),
                                     msg("system", "MID"), msg("user", "U1")});
  EXPECT_TRUE(has_later_system_message(messages));
  const FoldedConversation f = fold_later_system_messages(messages);
  const json want = json::array({msg("system", "S0"), msg("user", "U0"), msg("assistant", "A0"),
                                 msg("user", block("MID") + kSep + "U1")});
  EXPECT_EQ(f.messages, want);
  ASSERT_EQ(f.runs.size(), 1u);
  EXPECT_EQ(f.runs[0], (ContentRun{3, 0, block("MID").size() + kSep.size(), Role::system}));
}

TEST(ChatSystemFold, PreviousUserMessageWhenAnAssistantFollows) {
  // Claude Code: messages[1] is a system message between the first user turn and the answer.
  const json messages = json::array({msg("user", "U0"), msg("system", "agents: a, b"), msg("assistant", "A0"), msg("user", "U1")});
  const FoldedConversation f = fold_later_system_messages(messages);
  const json want = json::array({msg("user", "U0" + kSep + block("agents: a, b")), msg("assistant", "A0"), msg("user", "U1")});
  EXPECT_EQ(f.messages, want);
  ASSERT_EQ(f.runs.size(), 1u);
  EXPECT_EQ(f.runs[0], (ContentRun{0, 2, 2 + kSep.size() + block("agents: a, b").size(), Role::system}));
}

TEST(ChatSystemFold, ConsecutiveSystemMessagesFoldTogetherInOrder) {
  const json messages = json::array({msg("user", "U0"), msg("assistant", "A0"), msg("system", "one"),
                                     msg("developer", "two"), msg("user", "U1")});
  const FoldedConversation f = fold_later_system_messages(messages);
  EXPECT_EQ(f.messages.back(), msg("user", block("one") + kSep + block("two") + kSep + "U1"));
  EXPECT_EQ(f.messages.size(), 3u);
}

TEST(ChatSystemFold, ToolResultsStayWithTheirCallAndAnOwnUserMessageIsTheLastResort) {
  json call = {{"role", "assistant"}, {"content", ""},
               {"tool_calls", json::array({{{"id", "c1"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", json::object()}}}}})}};
  json result = {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "R"}};
  // A system message between a call and its result goes after the result, into the next user turn.
  json messages = json::array({msg("user", "U0"), call, msg("system", "MID"), result, msg("user", "U1")});
  FoldedConversation f = fold_later_system_messages(messages);
  EXPECT_EQ(f.messages, json::array({msg("user", "U0"), call, result, msg("user", block("MID") + kSep + "U1")}));
  // No user neighbour: a user message of its own after the tool results.
  messages = json::array({msg("user", "U0"), call, msg("system", "MID"), result});
  f = fold_later_system_messages(messages);
  EXPECT_EQ(f.messages, json::array({msg("user", "U0"), call, result, msg("user", block("MID"))}));
  ASSERT_EQ(f.runs.size(), 1u);
  EXPECT_EQ(f.runs[0], (ContentRun{3, 0, block("MID").size(), Role::system}));
  // Trailing after an assistant turn: its own user message at the end.
  messages = json::array({msg("user", "U0"), msg("assistant", "A0"), msg("system", "MID")});
  f = fold_later_system_messages(messages);
  EXPECT_EQ(f.messages, json::array({msg("user", "U0"), msg("assistant", "A0"), msg("user", block("MID"))}));
  // Trailing after a user turn: appended to it.
  messages = json::array({msg("user", "U0"), msg("system", "MID")});
  f = fold_later_system_messages(messages);
  EXPECT_EQ(f.messages, json::array({msg("user", "U0" + kSep + block("MID"))}));
}

TEST(ChatSystemFold, BlocksOnBothSidesOfOneUserMessageAndEmptyOnes) {
  const json messages = json::array({msg("user", "U0"), msg("system", "before"), msg("user", ""),
                                     msg("system", "after"), msg("system", ""), msg("assistant", "A")});
  const FoldedConversation f = fold_later_system_messages(messages);
  const std::string content = block("before") + kSep + block("after");
  EXPECT_EQ(f.messages, json::array({msg("user", "U0"), msg("user", content), msg("assistant", "A")}));
  ASSERT_EQ(f.runs.size(), 2u);
  EXPECT_EQ(f.runs[0], (ContentRun{1, 0, block("before").size() + kSep.size(), Role::system}));
  EXPECT_EQ(f.runs[1], (ContentRun{1, block("before").size() + kSep.size(), content.size(), Role::system}));
}

TEST(ChatSystemFold, TheFirstMessageIsNeverFoldedAndTargetsDoNotMoveWhenTheConversationGrows) {
  EXPECT_FALSE(has_later_system_message(json::array({msg("system", "S0"), msg("user", "U0")})));
  const json turn1 = json::array({msg("system", "S0"), msg("user", "U0"), msg("system", "MID"), msg("assistant", "A0")});
  json turn2 = turn1;
  turn2.push_back(msg("user", "U1"));
  turn2.push_back(msg("assistant", "A1"));
  const json f1 = fold_later_system_messages(turn1).messages;
  const json f2 = fold_later_system_messages(turn2).messages;
  for (size_t i = 0; i < f1.size(); ++i) EXPECT_EQ(f1[i], f2[i]) << i;
  EXPECT_EQ(f1[0], msg("system", "S0"));
}

// ---- real templates ----

const json kTools = json::parse(R"([{"type": "function", "function": {"name": "Bash",
  "description": "Run a command.", "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
  "required": ["command"]}}}])");

// Template variables for a fixture template: those of its first conformance case (bos/eos tokens,
// enable_thinking...), with the generation prompt on.
json fixture_kwargs(const std::filesystem::path& template_file) {
  namespace fs = std::filesystem;
  fs::path cases = template_file.parent_path().parent_path() / "chat_template_cases" / (template_file.stem().string() + ".json");
  json kwargs = json::object();
  if (fs::exists(cases)) {
    json doc = json::parse(keel::test::read_text(cases));
    for (const auto& [k, v] : doc["cases"][0]["context"].items())
      if (k != "messages" && k != "tools") kwargs[k] = v;
  }
  kwargs["add_generation_prompt"] = true;
  return kwargs;
}

// Every fixture template that renders a normal conversation (system, user, assistant, user) also
// renders each mid-conversation shape, in place or folded, with the mid text present as system text.
TEST(ChatSystemFold, EveryFixtureTemplateRendersAMidConversationSystemMessage) {
  namespace fs = std::filesystem;
  const fs::path dir = keel::test::shared_dir() / "fixtures/chat_templates";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".jinja") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_GT(files.size(), 50u);

  const std::string mid = "Agents available: explorer, planner.";
  const json normal = json::array({msg("system", "You are terse."), msg("user", "What is 2+2?"), msg("assistant", "4."),
                                   msg("user", "And 3+3?")});
  std::vector<std::pair<std::string, json>> shapes;
  {
    json m = normal;  // Claude Code: right after the first user message
    m.insert(m.begin() + 2, msg("system", mid));
    shapes.emplace_back("after_first_user", m);
    m = normal;  // before the last user message
    m.insert(m.begin() + 3, msg("system", mid));
    shapes.emplace_back("before_last_user", m);
    m = normal;  // at the end
    m.push_back(msg("system", mid));
    shapes.emplace_back("at_end", m);
    m = normal;  // no leading system message: messages[1]
    m.erase(m.begin());
    m.insert(m.begin() + 1, msg("system", mid));
    shapes.emplace_back("messages_1_no_system", m);
  }

  ChatRenderOptions options;
  options.jinja.now = fixture_clock;
  int normal_ok = 0, checked = 0, in_place = 0, folded = 0;
  std::vector<std::string> in_place_templates;
  for (const auto& file : files) {
    const std::string name = file.stem().string();
    std::optional<ChatTemplate> tmpl;
    try {
      tmpl.emplace(keel::test::read_text(file));
    } catch (const keel::Error&) {
      continue;
    }
    const json kwargs = fixture_kwargs(file);
    for (const json& tools : {json(nullptr), kTools}) {
      try {
        tmpl->render(normal, tools, kwargs, options);
      } catch (const keel::Error&) {
        continue;  // this template cannot render a plain conversation (with these tools) at all
      }
      ++normal_ok;
      for (const auto& [shape, messages] : shapes) {
        const std::string where = name + "/" + shape + (tools.is_null() ? "" : "/tools");
        ConversationPrompt out;
        try {
          out = render_conversation(*tmpl, messages, tools, kwargs, options);
        } catch (const keel::Error& e) {
          ADD_FAILURE() << where << ": " << e.what();
          continue;
        }
        ++checked;
        EXPECT_NE(out.system, SystemPlacement::none) << where;
        if (out.system == SystemPlacement::in_place) ++in_place;
        else ++folded;
        if (out.system == SystemPlacement::in_place && shape == "after_first_user" && tools.is_null())
          in_place_templates.push_back(name);
        const size_t at = out.prompt.text.find(mid);
        ASSERT_NE(at, std::string::npos) << where << "\n" << out.prompt.text;
        EXPECT_EQ(role_of_bytes(out.prompt, at, at + mid.size()), Role::system) << where;
        if (out.system == SystemPlacement::folded) {
          EXPECT_NE(out.prompt.text.find(block(mid)), std::string::npos) << where << "\n" << out.prompt.text;
        }
        // The other messages are all still there.
        for (const char* text : {"What is 2+2?", "And 3+3?"})
          EXPECT_NE(out.prompt.text.find(text), std::string::npos) << where << ": " << text;
      }
    }
  }
  std::printf("mid-conversation system: %d renders checked over %d template/tool combinations (%d in place, %d folded)\n",
              checked, normal_ok, in_place, folded);
  std::printf("in place: ");
  for (const auto& n : in_place_templates) std::printf("%s ", n.c_str());
  std::printf("\n");
  EXPECT_GT(normal_ok, 90);
  EXPECT_EQ(checked, normal_ok * static_cast<int>(shapes.size()));
  EXPECT_GT(folded, 0);
  // ChatML templates render a system turn anywhere.
  for (const char* n : {"Qwen-Qwen2.5-7B-Instruct", "Qwen-Qwen3-0.6B"})
    EXPECT_NE(std::find(in_place_templates.begin(), in_place_templates.end(), n), in_place_templates.end()) << n;
}

// Gemma 3 raises for a system message after the first ("Conversation roles must alternate"): the
// text is folded into the user turn before the answer, and its tokens are still system tokens.
TEST(ChatSystemFold, TemplatesThatRaiseGetTheFoldWithRolesKept) {
  const auto shared = keel::test::shared_dir() / "fixtures";
  ChatTemplate tmpl(keel::test::read_text(shared / "chat_templates/google-gemma-3-it.jinja"), "<bos>", "<eos>");
  const json messages = json::array({msg("system", "Be terse."), msg("user", "List /tmp"), msg("system", "Skills: pdf, xlsx."),
                                     msg("assistant", "Done."), msg("user", "Thanks")});
  EXPECT_THROW(tmpl.render(messages, nullptr, json{{"add_generation_prompt", true}}), keel::Error);
  const ConversationPrompt out = render_conversation(tmpl, messages, nullptr, json{{"add_generation_prompt", true}});
  EXPECT_EQ(out.system, SystemPlacement::folded);
  const std::string want = "<start_of_turn>user\nBe terse.\n\nList /tmp\n\n<system>\nSkills: pdf, xlsx.\n</system><end_of_turn>\n";
  const size_t at = out.prompt.text.find(want);
  ASSERT_NE(at, std::string::npos) << out.prompt.text;
  const size_t user_at = out.prompt.text.find("List /tmp");
  EXPECT_EQ(role_of_bytes(out.prompt, user_at, user_at + 9), Role::user);
  const size_t fold_at = out.prompt.text.find("\n\n<system>");
  const size_t fold_end = out.prompt.text.find("</system>") + 9;
  EXPECT_EQ(role_of_bytes(out.prompt, fold_at, fold_end), Role::system);

  // Down to tokens with Gemma 3's own tokenizer.
  const auto tok = text::Tokenizer::from_file(shared / "tokenizers/gemma3");
  const std::vector<int32_t> ids = encode_rendered_prompt(tok, out.prompt.text, out.prompt.spans);
  EXPECT_EQ(ids, tok.encode(out.prompt.text));  // no special token in the client's text: unchanged
  const std::vector<Role> roles = token_roles(tok, ids, out.prompt.text, out.prompt.spans);
  std::string system_text;
  text::Decoder::State state;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string piece = tok.decode_token_bytes(ids[i], state);
    if (roles[i] == Role::system) system_text += piece;
  }
  EXPECT_NE(system_text.find("Skills: pdf, xlsx."), std::string::npos) << system_text;
  EXPECT_NE(system_text.find("<system>"), std::string::npos) << system_text;
}

// A template that neither raises nor shows a later system message would lose its text: keel
// notices the text missing and folds it.
TEST(ChatSystemFold, TemplatesThatDropTheMessageGetTheFold) {
  ChatTemplate tmpl(
      "{% for m in messages %}{% if m.role == 'user' %}U: {{ m.content }}\n{% elif m.role == 'assistant' %}"
      "A: {{ m.content }}\n{% endif %}{% endfor %}");
  const json messages = json::array({msg("user", "hi"), msg("system", "  be brief  "), msg("assistant", "ok")});
  const ConversationPrompt out = render_conversation(tmpl, messages, nullptr, json::object());
  EXPECT_EQ(out.system, SystemPlacement::folded);
  EXPECT_EQ(out.prompt.text, "U: hi\n\n<system>\n  be brief  \n</system>\nA: ok\n");
  // A template that shows it in place keeps it there.
  ChatTemplate shows("{% for m in messages %}{{ m.role }}: {{ m.content | trim }}\n{% endfor %}");
  const ConversationPrompt kept = render_conversation(shows, messages, nullptr, json::object());
  EXPECT_EQ(kept.system, SystemPlacement::in_place);
  EXPECT_EQ(kept.prompt.text, "user: hi\nsystem: be brief\nassistant: ok\n");
  // No later system message: a plain render.
  EXPECT_EQ(render_conversation(shows, json::array({msg("system", "s"), msg("user", "u")}), nullptr, json::object()).system,
            SystemPlacement::none);
}

// ---- the API path ----

TEST(ApiAnthropicRequest, SystemMessageInsideMessagesIsKeptInPlace) {
  const std::string body = R"({"model":"m","max_tokens":10,"system":"top",
    "messages":[{"role":"user","content":"hi"},
      {"role":"system","content":[{"type":"text","text":"Agents: explorer."},{"type":"text","text":"Skills: pdf."}]},
      {"role":"assistant","content":"hello"},
      {"role":"system","content":"late note"},
      {"role":"system","content":""},
      {"role":"user","content":"go"}]})";
  const api::ChatRequest r = api::parse_anthropic_request(body, {});
  EXPECT_EQ(r.messages.dump(),
            R"([{"role":"system","content":"top"},{"role":"user","content":"hi"},)"
            R"({"role":"system","content":"Agents: explorer.\nSkills: pdf."},{"role":"assistant","content":"hello"},)"
            R"({"role":"system","content":"late note"},{"role":"user","content":"go"}])");
  EXPECT_FALSE(r.assistant_prefill);
  EXPECT_NO_THROW(api::parse_anthropic_count_tokens_request(body, {}));
}

const ServedModel& tiny_model() { return keel::test::tiny_served_model(); }

// tiny-toolcaller's template (Qwen2.5's) renders a system turn anywhere: the message stays where
// the client put it, as a system turn, and its tokens are system tokens.
TEST(ServePrompt, MidConversationSystemMessageRendersInPlaceWithTinyToolcaller) {
  const std::string body = R"({"model":"m","max_tokens":10,"system":"You are helpful.",
    "messages":[{"role":"user","content":"hi"},
      {"role":"system","content":[{"type":"text","text":"Agents: explorer, planner."}]},
      {"role":"assistant","content":"hello"},{"role":"user","content":"go"}]})";
  const api::ChatRequest r = api::parse_anthropic_request(body, {});
  const PreparedPrompt p = tiny_model().prepare(r.messages, r.tools, r.thinking);
  const std::string text = tiny_model().tokenizer().decode(p.ids);
  EXPECT_NE(text.find("<|im_start|>user\nhi<|im_end|>\n<|im_start|>system\nAgents: explorer, planner.<|im_end|>\n"
                      "<|im_start|>assistant\nhello<|im_end|>\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("<system>"), std::string::npos) << text;
  std::string system_text;
  text::Decoder::State state;
  for (size_t i = 0; i < p.ids.size(); ++i) {
    const std::string piece = tiny_model().tokenizer().decode_token_bytes(p.ids[i], state);
    if (p.roles[i] == Role::system) system_text += piece;
  }
  EXPECT_NE(system_text.find("Agents: explorer, planner."), std::string::npos) << system_text;
}

}  // namespace
}  // namespace keel::chat
