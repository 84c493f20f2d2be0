// The reasoning splitter: <think>...</think> (and the per-family markers) become Reasoning events
// when asked, whether the output opens the block itself or the prompt already did; with
// reasoning off the markers are ordinary text. Every case is also fed in every two-piece split
// and byte by byte.
#include <gtest/gtest.h>

#include "keel/toolcall/tool_call_parser.h"

namespace {

using keel::toolcall::coalesce_events;
using keel::toolcall::make_output_parser;
using keel::toolcall::OutputParserOptions;
using keel::toolcall::ParseEvent;
using keel::toolcall::ToolCallFormat;

std::vector<std::string> run(const OutputParserOptions& options, const std::vector<std::string_view>& pieces) {
  std::vector<ParseEvent> events;
  auto parser = make_output_parser(options);
  for (std::string_view p : pieces) parser->feed(p, events);
  parser->finish(events);
  std::vector<std::string> out;
  for (const ParseEvent& e : coalesce_events(events)) {
    if (e.kind == ParseEvent::Kind::Text) out.push_back("T|" + e.text);
    if (e.kind == ParseEvent::Kind::Reasoning) out.push_back("R|" + e.text);
    if (e.kind == ParseEvent::Kind::Call) out.push_back("C|" + e.call.name + "|" + e.call.arguments.dump());
  }
  return out;
}

void check(const OutputParserOptions& options, std::string_view output, const std::vector<std::string>& expected) {
  SCOPED_TRACE(std::string(output));
  EXPECT_EQ(run(options, {output}), expected);
  for (size_t k = 0; k <= output.size(); ++k) {
    ASSERT_EQ(run(options, {output.substr(0, k), output.substr(k)}), expected) << "split at byte " << k;
  }
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < output.size(); ++i) bytes.push_back(output.substr(i, 1));
  ASSERT_EQ(run(options, bytes), expected) << "byte by byte";
}

OutputParserOptions opts(ToolCallFormat format, bool reasoning, bool starts_in_reasoning) {
  OutputParserOptions o;
  o.format = format;
  o.reasoning = reasoning;
  o.starts_in_reasoning = starts_in_reasoning;
  return o;
}

TEST(ToolcallReasoning, ThinkBlockOpenedByTheModel) {
  check(opts(ToolCallFormat::Hermes, true, false), "<think>\nI should list the files.\n</think>\n\nSure, listing.",
        {"R|I should list the files.", "T|Sure, listing."});
}

TEST(ToolcallReasoning, StartsInReasoningWhenThePromptOpenedIt) {
  check(opts(ToolCallFormat::Hermes, true, true),
        "Plan: ls ✓\n</think>\n\n<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>",
        {"R|Plan: ls ✓", "C|Bash|{\"command\":\"ls\"}"});
}

TEST(ToolcallReasoning, WithoutStartsInReasoningTheSameTextIsContent) {
  check(opts(ToolCallFormat::Hermes, true, false), "Plan: ls\n</think>\n\nDone.", {"T|Plan: ls\n</think>\n\nDone."});
}

TEST(ToolcallReasoning, OffMeansMarkersAreText) {
  check(opts(ToolCallFormat::Hermes, false, false), "<think>x</think>y", {"T|<think>x</think>y"});
}

TEST(ToolcallReasoning, CallMarkersInsideReasoningAreReasoning) {
  check(opts(ToolCallFormat::Hermes, true, true), "maybe <tool_call>{\"name\": \"a\"}</tool_call>?</think>ok",
        {"R|maybe <tool_call>{\"name\": \"a\"}</tool_call>?", "T|ok"});
}

TEST(ToolcallReasoning, UnclosedReasoningAtEndOfOutput) {
  check(opts(ToolCallFormat::Hermes, true, false), "<think>still thinking when max_tokens hit",
        {"R|still thinking when max_tokens hit"});
  check(opts(ToolCallFormat::Hermes, true, true), "cut in the middle </thi", {"R|cut in the middle </thi"});
}

TEST(ToolcallReasoning, EmptyThinkBlock) {
  check(opts(ToolCallFormat::Hermes, true, false), "<think>\n\n</think>\n\nHello", {"T|Hello"});
}

TEST(ToolcallReasoning, GemmaThoughtChannel) {
  check(opts(ToolCallFormat::Gemma4, true, false),
        "<|channel>thought\nNeed ls.\n<channel|><|tool_call>call:Bash{command:<|\"|>ls<|\"|>}<tool_call|>",
        {"R|Need ls.", "C|Bash|{\"command\":\"ls\"}"});
}

TEST(ToolcallReasoning, MistralThinkBlock) {
  check(opts(ToolCallFormat::Mistral, true, false), "[THINK]Simple.[/THINK]The answer is 4.",
        {"R|Simple.", "T|The answer is 4."});
}

TEST(ToolcallReasoning, HarmonyAnalysisIsAlwaysReasoning) {
  check(opts(ToolCallFormat::Harmony, false, false),
        "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Answer.<|return|>",
        {"R|Think.", "T|Answer."});
}

TEST(ToolcallReasoning, DeltasStreamBeforeTheBlockCloses) {
  // Reasoning must reach the client while the model is still thinking, not when </think> arrives.
  auto parser = make_output_parser(opts(ToolCallFormat::Hermes, true, true));
  std::vector<ParseEvent> events;
  parser->feed("First I will", events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, ParseEvent::Kind::Reasoning);
  EXPECT_EQ(events[0].text, "First I will");
  parser->feed(" check </th", events);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].text, " check");
}

TEST(ToolcallReasoning, TextStreamsAsSoonAsItCannotBeAMarker) {
  auto parser = make_output_parser(opts(ToolCallFormat::Hermes, false, false));
  std::vector<ParseEvent> events;
  parser->feed("Hello wor", events);
  parser->feed("ld <tool", events);
  ASSERT_EQ(coalesce_events(events).size(), 1u);
  EXPECT_EQ(coalesce_events(events)[0].text, "Hello world");
  parser->feed("s> are nice", events);
  EXPECT_EQ(coalesce_events(events)[0].text, "Hello world <tools> are nice");
}

TEST(ToolcallReasoning, SplitUtf8CharacterIsHeldWhole) {
  auto parser = make_output_parser(opts(ToolCallFormat::Hermes, false, false));
  std::vector<ParseEvent> events;
  const std::string check_mark = "✓";  // three bytes
  parser->feed("ok " + check_mark.substr(0, 2), events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].text, "ok ");
  parser->feed(check_mark.substr(2), events);
  EXPECT_EQ(coalesce_events(events)[0].text, "ok " + check_mark);
}

}  // namespace
