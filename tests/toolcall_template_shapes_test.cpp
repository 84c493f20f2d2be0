// The output shapes models were trained on are the ones their chat templates render for assistant
// tool calls. Each case below cuts the assistant turn with two calls out of a fixture's expected
// rendering (shared/fixtures/chat_template_cases, "tool_round_trip"), feeds it to the parser as if
// the model had generated it, and checks that the calls come back as the conversation had them:
// same names, same arguments after schema checking against the case's own tools, same order.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "keel/toolcall/output_syntax.h"
#include "keel/toolcall/schema_check.h"
#include "keel/toolcall/tool_call_parser.h"
#include "test_support.h"

namespace {

using keel::toolcall::ParseEvent;
using keel::toolcall::ToolCallFormat;
using nlohmann::ordered_json;

struct Shape {
  const char* file;
  ToolCallFormat format;
  bool reasoning;
  const char* after;  // the assistant turn starts after the first of these that follows "a.txt"
  const char* until;  // and ends before this (or after, when include_until)
  bool include_until;
  size_t calls;       // how many of the message's calls the template renders
  const char* text;   // the message's content as the template renders it in that turn
};

const Shape kShapes[] = {
    {"Qwen-Qwen3-0.6B.json", ToolCallFormat::Hermes, true, "<|im_start|>assistant\n", "<|im_end|>", false, 2, "Reading both."},
    {"Qwen-Qwen2.5-7B-Instruct.json", ToolCallFormat::Hermes, false, "<|im_start|>assistant\n", "<|im_end|>", false, 2,
     "Reading both."},
    {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.json", ToolCallFormat::Hermes, false, "<|im_start|>assistant\n",
     "<|im_end|>", false, 2, ""},
    {"Qwen3-Coder.json", ToolCallFormat::Qwen3CoderXml, false, "<|im_start|>assistant\n", "<|im_end|>", false, 2,
     "Reading both."},
    {"Qwen3.5-4B.json", ToolCallFormat::Qwen3CoderXml, true, "<|im_start|>assistant\n", "<|im_end|>", false, 2,
     "Reading both."},
    {"openai-gpt-oss-120b.json", ToolCallFormat::Harmony, true, "<|start|>assistant", "<|call|>", true, 1, ""},
    {"google-gemma-4-31B-it.json", ToolCallFormat::Gemma4, true, "<tool_response|>", "<|tool_response>", false, 2, ""},
    {"unsloth-mistral-Devstral-Small-2507.json", ToolCallFormat::Mistral, false, "[/TOOL_RESULTS]", "</s>", false, 2,
     "Reading both."},
    {"mistralai-Ministral-3-14B-Reasoning-2512.json", ToolCallFormat::Mistral, true, "[/TOOL_RESULTS]", "</s>", false, 2,
     "Reading both."},
};

const ordered_json* find_case(const ordered_json& doc, const std::string& name) {
  for (const ordered_json& c : doc["cases"]) {
    if (c["name"] == name) return &c;
  }
  return nullptr;
}

TEST(ToolcallTemplateShapes, RenderedCallsParseBackToTheConversation) {
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(shape.file);
    const auto path = keel::test::shared_dir() / "fixtures" / "chat_template_cases" / shape.file;
    const ordered_json doc = ordered_json::parse(keel::test::read_text(path));
    const ordered_json* round_trip = find_case(doc, "tool_round_trip");
    ASSERT_NE(round_trip, nullptr);
    const std::string rendered = (*round_trip)["expected"].get<std::string>();
    const size_t start = rendered.find(shape.after, rendered.find("a.txt"));
    ASSERT_NE(start, std::string::npos);
    const size_t from = start + std::string_view(shape.after).size();
    size_t to = rendered.find(shape.until, from);
    ASSERT_NE(to, std::string::npos);
    if (shape.include_until) to += std::string_view(shape.until).size();
    const std::string output = rendered.substr(from, to - from);
    SCOPED_TRACE(output);

    keel::toolcall::OutputParserOptions options;
    options.format = shape.format;
    options.reasoning = shape.reasoning;
    const auto whole = keel::toolcall::coalesce_events(keel::toolcall::parse_output(options, output));

    // Fed byte by byte, the same events.
    std::vector<ParseEvent> streamed;
    auto parser = keel::toolcall::make_output_parser(options);
    for (char c : output) parser->feed(std::string_view(&c, 1), streamed);
    parser->finish(streamed);
    streamed = keel::toolcall::coalesce_events(streamed);
    ASSERT_EQ(streamed.size(), whole.size());

    const ordered_json& tools = (*round_trip)["context"]["tools"];
    const ordered_json* message = nullptr;
    int assistant_with_calls = 0;
    for (const ordered_json& m : (*round_trip)["context"]["messages"]) {
      if (m["role"] == "assistant" && m.contains("tool_calls") && ++assistant_with_calls == 2) message = &m;
    }
    ASSERT_NE(message, nullptr);

    std::string text;
    size_t call_index = 0;
    for (size_t i = 0; i < whole.size(); ++i) {
      const ParseEvent& e = whole[i];
      EXPECT_EQ(e.kind, streamed[i].kind);
      if (e.kind == ParseEvent::Kind::Text) text += e.text;
      if (e.kind != ParseEvent::Kind::Call) continue;
      ASSERT_LT(call_index, shape.calls);
      EXPECT_EQ(e.call.raw, streamed[i].call.raw);
      const ordered_json& want = (*message)["tool_calls"][call_index]["function"];
      const auto checked = keel::toolcall::check_tool_call(e.call, tools);
      EXPECT_TRUE(checked.valid) << checked.reason;
      EXPECT_EQ(checked.name, want["name"].get<std::string>());
      EXPECT_EQ(checked.arguments, want["arguments"]);
      ++call_index;
    }
    EXPECT_EQ(call_index, shape.calls);
    EXPECT_EQ(text, shape.text);
  }
}

// What keel writes for a model whose request requires a call (toolcall::call_opener) is the
// template's own rendering of a call's start: with the name, through to where its arguments begin.
TEST(ToolcallTemplateShapes, CallOpenersAreWhatTheTemplatesRender) {
  struct Rendering {
    std::string file;
    ToolCallFormat format;
    std::string case_name;  // a case whose history holds an assistant call
  };
  std::vector<Rendering> renderings;
  for (const Shape& shape : kShapes) renderings.push_back({shape.file, shape.format, "tool_round_trip"});
  // Llama 3.1's template renders one call per message, so only the single-call case renders.
  renderings.push_back({"meta-llama-Llama-3.1-8B-Instruct.json", ToolCallFormat::Llama3Json, "tool_round_trip_gen"});
  int checked = 0;
  for (const Rendering& r : renderings) {
    SCOPED_TRACE(r.file);
    if (keel::toolcall::call_opener(r.format, "").empty()) continue;
    const auto path = keel::test::shared_dir() / "fixtures" / "chat_template_cases" / r.file;
    const ordered_json doc = ordered_json::parse(keel::test::read_text(path));
    const ordered_json* c = find_case(doc, r.case_name);
    ASSERT_NE(c, nullptr);
    const std::string rendered = (*c)["expected"].get<std::string>();
    std::string name;
    for (const ordered_json& m : (*c)["context"]["messages"]) {
      if (m["role"] == "assistant" && m.contains("tool_calls")) {
        name = m["tool_calls"][0]["function"]["name"].get<std::string>();
        break;
      }
    }
    ASSERT_FALSE(name.empty());
    for (bool after_output : {false, true}) {
      const std::string any = keel::toolcall::call_opener(r.format, "", after_output);
      const std::string named = keel::toolcall::call_opener(r.format, name, after_output);
      EXPECT_TRUE(named.starts_with(any)) << any << " / " << named;
      EXPECT_NE(rendered.find(named), std::string::npos) << named;
    }
    ++checked;
  }
  EXPECT_GE(checked, 6);  // Hermes (3 templates), Qwen3-Coder XML (2), Harmony, Gemma 4, Llama 3.1
}

}  // namespace
