// Tool-call format and reasoning control detected from the real chat templates in
// shared/fixtures/chat_templates. Each expectation was checked by reading the template: which
// markers it writes around an assistant's tool calls, and which variable (if any) turns thinking on.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "keel/chat/template_files.h"
#include "keel/toolcall/format_detect.h"
#include "test_support.h"

using keel::toolcall::ReasoningKind;
namespace toolcall = keel::toolcall;

namespace {

struct Expected {
  const char* file;
  const char* format;
  ReasoningKind reasoning;
  const char* switch_name;  // for switchable templates
};

const Expected kTemplates[] = {
    {"Apertus-8B-Instruct.jinja", "apertus", ReasoningKind::Switchable, "enable_thinking"},
    {"Apriel-1.6-15b-Thinker-fixed.jinja", "apriel", ReasoningKind::AlwaysOn, ""},
    {"Bielik-11B-v3.0-Instruct.jinja", "hermes", ReasoningKind::Switchable, "enable_thinking"},
    {"ByteDance-Seed-OSS.jinja", "seed-oss", ReasoningKind::Switchable, "thinking_budget (0 turns it off)"},
    {"CohereForAI-c4ai-command-r-plus-tool_use.jinja", "command-r", ReasoningKind::None, ""},
    {"CohereForAI-c4ai-command-r-v01-default.jinja", "none", ReasoningKind::None, ""},
    {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", "command-r", ReasoningKind::AlwaysOn, ""},
    {"GLM-4.6.jinja", "glm", ReasoningKind::Switchable, "enable_thinking"},
    {"GLM-4.7-Flash.jinja", "glm", ReasoningKind::Switchable, "enable_thinking"},
    {"GigaChat3-10B-A1.8B.jinja", "gigachat", ReasoningKind::None, ""},
    {"GigaChat3.1-10B-A1.8B.jinja", "gigachat", ReasoningKind::None, ""},
    {"HuggingFaceTB-SmolLM3-3B.jinja", "none", ReasoningKind::Switchable, "enable_thinking"},
    {"Kimi-K2-Instruct.jinja", "kimi-k2", ReasoningKind::None, ""},
    {"Kimi-K2-Thinking.jinja", "kimi-k2", ReasoningKind::AlwaysOn, ""},
    {"LFM2-8B-A1B.jinja", "lfm2", ReasoningKind::None, ""},
    {"LFM2.5-8B-A1B.jinja", "lfm2", ReasoningKind::AlwaysOn, ""},
    {"LFM2.5-Instruct.jinja", "none", ReasoningKind::None, ""},
    {"MiMo-VL.jinja", "hermes", ReasoningKind::None, ""},
    {"MiniMax-M2.jinja", "minimax-m2", ReasoningKind::AlwaysOn, ""},
    {"Mistral-Small-3.2-24B-Instruct-2506.jinja", "mistral", ReasoningKind::None, ""},
    {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", "qwen3-coder-xml", ReasoningKind::Switchable, "enable_thinking"},
    {"NVIDIA-Nemotron-Nano-v2.jinja", "nemotron-toolcall", ReasoningKind::Switchable, "/think or /no_think in the system prompt"},
    {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "hermes", ReasoningKind::None, ""},
    {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "hermes", ReasoningKind::None, ""},
    {"Qwen-QwQ-32B.jinja", "hermes", ReasoningKind::AlwaysOn, ""},
    {"Qwen-Qwen2.5-7B-Instruct.jinja", "hermes", ReasoningKind::None, ""},
    {"Qwen-Qwen3-0.6B.jinja", "hermes", ReasoningKind::Switchable, "enable_thinking"},
    {"Qwen3-Coder.jinja", "qwen3-coder-xml", ReasoningKind::None, ""},
    {"Qwen3.5-4B.jinja", "qwen3-coder-xml", ReasoningKind::Switchable, "enable_thinking"},
    {"Reka-Edge.jinja", "hermes", ReasoningKind::Switchable, "enable_thinking"},
    {"StepFun3.5-Flash.jinja", "qwen3-coder-xml", ReasoningKind::AlwaysOn, ""},
    {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", "deepseek", ReasoningKind::AlwaysOn, ""},
    {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "deepseek", ReasoningKind::AlwaysOn, ""},
    {"deepseek-ai-DeepSeek-R1.jinja", "deepseek", ReasoningKind::AlwaysOn, ""},
    {"deepseek-ai-DeepSeek-V3.1.jinja", "deepseek", ReasoningKind::Switchable, "thinking"},
    {"deepseek-ai-DeepSeek-V3.2.jinja", "deepseek-dsml", ReasoningKind::Switchable, "enable_thinking"},
    {"deepseek-ai-DeepSeek-V3.jinja", "deepseek", ReasoningKind::None, ""},
    {"fireworks-ai-llama-3-firefunction-v2.jinja", "firefunction", ReasoningKind::None, ""},
    {"google-gemma-2-2b-it.jinja", "none", ReasoningKind::None, ""},
    {"google-gemma-3-it.jinja", "none", ReasoningKind::None, ""},
    {"google-gemma-4-31B-it-interleaved.jinja", "gemma4", ReasoningKind::Switchable, "enable_thinking"},
    {"google-gemma-4-31B-it.jinja", "gemma4", ReasoningKind::Switchable, "enable_thinking"},
    {"ibm-granite-granite-3.3-2B-Instruct.jinja", "granite3", ReasoningKind::Switchable, "thinking"},
    {"ibm-granite-granite-4.0.jinja", "hermes", ReasoningKind::None, ""},
    {"ibm-granite-granite-4.1.jinja", "hermes", ReasoningKind::None, ""},
    {"llama-cpp-deepseek-r1.jinja", "deepseek", ReasoningKind::AlwaysOn, ""},
    {"llama-cpp-rwkv-world.jinja", "none", ReasoningKind::Switchable, "enable_thinking"},
    {"meetkai-functionary-medium-v3.1.jinja", "functionary-v3.1", ReasoningKind::None, ""},
    {"meetkai-functionary-medium-v3.2.jinja", "functionary-v3.2", ReasoningKind::None, ""},
    {"meta-llama-Llama-3.1-8B-Instruct.jinja", "llama3-json", ReasoningKind::None, ""},
    {"meta-llama-Llama-3.2-3B-Instruct.jinja", "llama3-json", ReasoningKind::None, ""},
    {"meta-llama-Llama-3.3-70B-Instruct.jinja", "llama3-json", ReasoningKind::None, ""},
    {"microsoft-Phi-3.5-mini-instruct.jinja", "none", ReasoningKind::None, ""},
    {"microsoft-Phi-4-mini-instruct.jinja", "none", ReasoningKind::None, ""},
    {"microsoft-phi-4.jinja", "none", ReasoningKind::None, ""},
    {"mistralai-Ministral-3-14B-Reasoning-2512.jinja", "mistral", ReasoningKind::AlwaysOn, ""},
    {"mistralai-Mistral-Nemo-Instruct-2407.jinja", "mistral", ReasoningKind::None, ""},
    {"moonshotai-Kimi-K2.jinja", "kimi-k2", ReasoningKind::None, ""},
    {"openai-gpt-oss-120b.jinja", "harmony", ReasoningKind::AlwaysOn, ""},
    {"stepfun-ai-Step-3.5-Flash.jinja", "qwen3-coder-xml", ReasoningKind::AlwaysOn, ""},
    {"unsloth-Apriel-1.5.jinja", "apriel", ReasoningKind::AlwaysOn, ""},
    {"unsloth-mistral-Devstral-Small-2507.jinja", "mistral", ReasoningKind::None, ""},
    {"upstage-Solar-Open-100B.jinja", "solar", ReasoningKind::AlwaysOn, ""},
};

}  // namespace

TEST(PlanFormatDetect, EveryFixtureTemplate) {
  const auto dir = keel::test::shared_dir() / "fixtures/chat_templates";
  std::set<std::string> covered;
  for (const Expected& e : kTemplates) {
    const std::string text = keel::test::read_text(dir / e.file);
    const auto format = toolcall::detect_tool_call_format(text);
    const auto reasoning = toolcall::detect_reasoning_control(text);
    EXPECT_EQ(format.name, e.format) << e.file;
    EXPECT_EQ(reasoning.kind, e.reasoning) << e.file << ": " << reasoning.how;
    if (e.reasoning == ReasoningKind::Switchable) {
      EXPECT_EQ(reasoning.how, e.switch_name) << e.file;
    }
    covered.insert(e.file);
  }
  // A template added to the fixtures must be added here too.
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_TRUE(covered.count(entry.path().filename().string())) << entry.path().filename() << " has no expectation";
  }
}

TEST(PlanFormatDetect, TheFormatsKeelParses) {
  const auto dir = keel::test::shared_dir() / "fixtures/chat_templates";
  auto detect = [&](const char* file) { return toolcall::detect_tool_call_format(keel::test::read_text(dir / file)); };
  EXPECT_TRUE(detect("Qwen-Qwen2.5-7B-Instruct.jinja").keel_parses);           // hermes
  EXPECT_TRUE(detect("Qwen3-Coder.jinja").keel_parses);                        // qwen3-coder-xml
  EXPECT_TRUE(detect("mistralai-Mistral-Nemo-Instruct-2407.jinja").keel_parses);  // mistral
  EXPECT_TRUE(detect("meta-llama-Llama-3.3-70B-Instruct.jinja").keel_parses);  // llama3-json
  EXPECT_TRUE(detect("deepseek-ai-DeepSeek-V3.jinja").keel_parses);            // deepseek
  EXPECT_TRUE(detect("openai-gpt-oss-120b.jinja").keel_parses);                // harmony
  EXPECT_TRUE(detect("google-gemma-4-31B-it.jinja").keel_parses);              // gemma4
  EXPECT_FALSE(detect("Kimi-K2-Instruct.jinja").keel_parses);                  // recognized, no parser yet
  const auto none = detect("google-gemma-3-it.jinja");
  EXPECT_EQ(toolcall::describe_tool_call_format(none), "none: no structured tool calls from this model");
}

TEST(PlanFormatDetect, ProseAndStringsAreNotSwitches) {
  // "thinking" in prose, an attribute, a keyword argument and a stripped </think> are not switches.
  const std::string text =
      "Use careful thinking here.{% set ns = namespace(enable_thinking=true) %}"
      "{% if message.thinking %}{{ message.thinking }}{% endif %}"
      "{% set content = content.split('</think>')[-1] %}{{ '<tool_call>' }}";
  const auto r = toolcall::detect_reasoning_control(text);
  EXPECT_EQ(r.kind, ReasoningKind::None) << r.how;
  EXPECT_EQ(toolcall::detect_tool_call_format(text).name, "hermes");
  EXPECT_EQ(toolcall::detect_reasoning_control("{% if enable_thinking is defined and not enable_thinking %}x{% endif %}").kind,
            ReasoningKind::Switchable);
}

TEST(PlanFormatDetect, TemplatesInsideTokenizerConfig) {
  // Hugging Face folders keep the template in tokenizer_config.json.
  auto t = keel::chat::find_chat_template(keel::test::shared_dir() / "fixtures/tokenizers/qwen3");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->origin, "tokenizer_config.json");
  EXPECT_EQ(toolcall::detect_tool_call_format(t->text).name, "hermes");
  EXPECT_EQ(toolcall::detect_reasoning_control(t->text).how, "enable_thinking");

  t = keel::chat::find_chat_template(keel::test::shared_dir() / "fixtures/tokenizers/deepseek-v3");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(toolcall::detect_tool_call_format(t->text).name, "deepseek");

  t = keel::chat::find_chat_template(keel::test::shared_dir() / "models/tiny-toolcaller");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(toolcall::detect_tool_call_format(t->text).name, "hermes");

  // gpt-oss ships its template as a separate file; this tokenizer_config.json has none.
  EXPECT_FALSE(keel::chat::find_chat_template(keel::test::shared_dir() / "fixtures/tokenizers/gpt-oss-20b").has_value());
  EXPECT_FALSE(keel::chat::find_chat_template(keel::test::shared_dir() / "fixtures/configs/Qwen3-8B").has_value());
}

TEST(PlanFormatDetect, NamedTemplatesPreferTheToolUseVariant) {
  // Hermes and Command R folders ship [{"name": "default"}, {"name": "tool_use"}]: only the tool-use
  // template shows how calls are written.
  keel::test::TempDir dir;
  std::ofstream(dir.path() / "tokenizer_config.json") << R"({"chat_template": [
      {"name": "default", "template": "{{ messages }}"},
      {"name": "tool_use", "template": "{{ '<tool_call>' }}{% if tool_calls %}{% endif %}"}]})";
  auto t = keel::chat::find_chat_template(dir.path());
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->origin, "tokenizer_config.json (tool_use)");
  EXPECT_EQ(toolcall::detect_tool_call_format(t->text).name, "hermes");
  // A chat_template.jinja next to it wins: newer folders keep the template there.
  std::ofstream(dir.path() / "chat_template.jinja") << "{{ '[TOOL_CALLS]' }}";
  t = keel::chat::find_chat_template(dir.path());
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->origin, "chat_template.jinja");
  EXPECT_EQ(toolcall::detect_tool_call_format(t->text).name, "mistral");
}
