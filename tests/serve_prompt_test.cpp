// What a request becomes before the engine sees it: the model's own template over the client's
// objects, key order and all.
#include <gtest/gtest.h>

#include "keel/api/chat_request.h"
#include "keel/engine/served_model.h"
#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;

const ServedModel& tiny_model() {
  static const ServedModel model(arch::resolve_model(tiny_toolcaller_dir()), ServedModelOptions{.threads = 1});
  return model;
}

std::string prompt_text(const api::ChatRequest& r) {
  const PreparedPrompt p = tiny_model().prepare(r.messages, r.tools, r.thinking);
  return tiny_model().tokenizer().decode(p.ids);
}

TEST(ServePrompt, ClientKeyOrderReachesThePromptUnchanged) {
  // Keys in an order no sorting JSON type would keep: "required" first, properties z before a.
  const std::string body = R"({"model":"m","max_tokens":8,
    "tools":[{"name":"Zap","description":"zap it","input_schema":{"required":["zulu"],"type":"object",
      "properties":{"zulu":{"type":"string"},"alpha":{"type":"integer"}}}}],
    "messages":[{"role":"user","content":"go"},
      {"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Zap","input":{"zulu":"z","alpha":1}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"}]}]})";
  const std::string text = prompt_text(api::parse_anthropic_request(body, {}));
  EXPECT_NE(text.find(R"({"required": ["zulu"], "type": "object", "properties": {"zulu": {"type": "string"}, "alpha": {"type": "integer"}}})"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"({"name": "Zap", "arguments": {"zulu": "z", "alpha": 1}})"), std::string::npos) << text;
  EXPECT_NE(text.find("<tool_response>\nok\n</tool_response>"), std::string::npos) << text;
}

TEST(ServePrompt, OpenAIArgumentStringsRenderAsObjects) {
  const std::string body = R"({"model":"m","messages":[{"role":"user","content":"go"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
        "function":{"name":"Zap","arguments":"{\"zulu\": \"z\", \"alpha\": 1}"}}]},
      {"role":"tool","tool_call_id":"call_1","content":"ok"}]})";
  const std::string text = prompt_text(api::parse_openai_request(body, {}));
  EXPECT_NE(text.find(R"({"name": "Zap", "arguments": {"zulu": "z", "alpha": 1}})"), std::string::npos) << text;
}

TEST(ServePrompt, EveryTokenHasARole) {
  const json& session = session_fixture();
  const api::ChatRequest r = api::parse_anthropic_request(session["cases"][12]["request"].dump(), {});
  const PreparedPrompt p = tiny_model().prepare(r.messages, r.tools, false);
  ASSERT_EQ(p.ids.size(), session["cases"][12]["prompt_tokens"].get<size_t>());
  ASSERT_EQ(p.roles.size(), p.ids.size());
  std::set<chat::Role> seen(p.roles.begin(), p.roles.end());
  for (chat::Role role : {chat::Role::system, chat::Role::tools, chat::Role::user, chat::Role::tool_call,
                          chat::Role::tool_result, chat::Role::scaffolding})
    EXPECT_TRUE(seen.count(role)) << chat::role_name(role);
}

}  // namespace
}  // namespace keel::test
