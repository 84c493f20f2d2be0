// End to end through the protocol layer: the golden session's real Anthropic requests, converted by
// parse_anthropic_request and rendered with tiny-toolcaller's own chat template, must tokenize to
// exactly the prompt_tokens the reference rendering produced. This is what proves the conversion
// (system, tools wrapper, tool_use -> tool_calls, tool_result -> tool messages, key order) is the
// one the model was served with.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "keel/api/chat_request.h"
#include "keel/chat/chat_renderer.h"
#include "keel/text/tokenizer.h"
#include "test_support.h"

namespace {

using keel::api::ChatRequest;
using Json = nlohmann::ordered_json;

std::filesystem::path model_dir() { return keel::test::shared_dir() / "models" / "tiny-toolcaller"; }

Json session() {
  return Json::parse(keel::test::read_text(keel::test::shared_dir() / "fixtures" / "golden" / "tiny-toolcaller.session.json"));
}

std::string render(const ChatRequest& request) {
  auto source = keel::chat::load_chat_template_source(model_dir(), !request.tools.is_null());
  keel::chat::ChatTemplate tmpl(source.source, source.bos_token, source.eos_token);
  Json kwargs = {{"add_generation_prompt", true}};
  return tmpl.render(request.messages, request.tools, kwargs).text;
}

}  // namespace

TEST(ApiSessionRender, EveryGoldenRequestRendersToTheReferenceTokenCount) {
  auto tokenizer = keel::text::Tokenizer::from_file(model_dir());
  Json golden = session();
  ASSERT_EQ(golden["cases"].size(), 14u);
  int matched = 0;
  for (const auto& c : golden["cases"]) {
    ChatRequest request = keel::api::parse_anthropic_request(c["request"].dump(), {});
    std::string prompt = render(request);
    size_t tokens = tokenizer.encode(prompt).size();
    EXPECT_EQ(tokens, c["prompt_tokens"].get<size_t>()) << c["name"] << "\n" << prompt;
    if (tokens == c["prompt_tokens"].get<size_t>()) ++matched;
  }
  std::printf("session prompts: %d/14 match the reference token counts\n", matched);
}

TEST(ApiSessionRender, HistoryRendersToolCallsAndResultsInTheModelsOwnFormat) {
  Json golden = session();
  ChatRequest request = keel::api::parse_anthropic_request(golden["cases"][13]["request"].dump(), {});
  std::string prompt = render(request);
  EXPECT_NE(prompt.find("<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"cd /tmp/test_calendar && ls | grep -v "
                        "November | xargs rm -r\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nDone.\n"
                        "</tool_response><|im_end|>\n<|im_start|>user\nList the contents of /tmp/test_calendar<|im_end|>\n"
                        "<|im_start|>assistant\n"),
            std::string::npos)
      << prompt;
  // Tool schemas render with the client's key order (type, properties, required), not sorted.
  EXPECT_NE(prompt.find("{\"type\": \"function\", \"function\": {\"name\": \"Bash\", \"description\": \"Execute a bash "
                        "command and return output.\", \"parameters\": {\"type\": \"object\", \"properties\": "
                        "{\"command\": {\"type\": \"string\""),
            std::string::npos)
      << prompt;
}
