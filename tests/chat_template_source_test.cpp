// Finding a model folder's chat template and special tokens.
#include <gtest/gtest.h>

#include <fstream>

#include "keel/chat/chat_renderer.h"
#include "keel/util/error.h"
#include "test_support.h"

namespace {

void write(const std::filesystem::path& p, const std::string& text) { std::ofstream(p) << text; }

}  // namespace

TEST(ChatTemplateSource, StringTemplateAndTokenObjects) {
  keel::test::TempDir dir;
  write(dir.path() / "tokenizer_config.json",
        R"({"chat_template": "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}",
            "bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>"})");
  auto src = keel::chat::load_chat_template_source(dir.path());
  EXPECT_EQ(src.bos_token, "<s>");
  EXPECT_EQ(src.eos_token, "</s>");
  keel::chat::ChatTemplate t(src.source, src.bos_token, src.eos_token);
  auto p = t.render(nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])"), nullptr, nullptr);
  EXPECT_EQ(p.text, "<s>hi</s>");
  ASSERT_EQ(p.spans.size(), 3u);
  EXPECT_EQ(p.spans[1], (keel::chat::RoleSpan{3, 5, keel::chat::Role::user}));
}

TEST(ChatTemplateSource, NamedTemplatesAndJinjaFile) {
  keel::test::TempDir dir;
  write(dir.path() / "tokenizer_config.json",
        R"({"chat_template": [{"name": "default", "template": "plain"}, {"name": "tool_use", "template": "tools"}]})");
  EXPECT_EQ(keel::chat::load_chat_template_source(dir.path(), false).source, "plain");
  EXPECT_EQ(keel::chat::load_chat_template_source(dir.path(), true).source, "tools");
  write(dir.path() / "chat_template.jinja", "from file");
  EXPECT_EQ(keel::chat::load_chat_template_source(dir.path(), true).source, "from file");
}

TEST(ChatTemplateSource, ClearErrors) {
  keel::test::TempDir dir;
  EXPECT_THROW(keel::chat::load_chat_template_source(dir.path()), keel::Error);
  write(dir.path() / "tokenizer_config.json", "{not json");
  EXPECT_THROW(keel::chat::load_chat_template_source(dir.path()), keel::Error);
  EXPECT_THROW(keel::chat::ChatTemplate("{% if %}"), keel::Error);
  keel::chat::ChatTemplate raising("{{ raise_exception('roles must alternate') }}");
  try {
    raising.render(nlohmann::ordered_json::array(), nullptr, nullptr);
    FAIL() << "no error";
  } catch (const keel::Error& e) {
    EXPECT_NE(std::string(e.what()).find("TemplateError: roles must alternate"), std::string::npos) << e.what();
  }
  keel::chat::ChatTemplate ok("x");
  EXPECT_THROW(ok.render(nlohmann::ordered_json::object(), nullptr, nullptr), keel::Error);  // messages not an array
}
