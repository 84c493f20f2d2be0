// Every tool-call format from realistic model output: single calls, text around them, two calls to
// the same tool, nested JSON, closing markers inside strings, unicode, truncated and malformed
// calls. Each output is also fed split at every byte boundary and byte by byte, and must give the
// same events as the one-shot feed once adjacent text deltas are joined.
#include <gtest/gtest.h>

#include <random>

#include "keel/toolcall/tool_call_parser.h"

namespace {

using keel::toolcall::coalesce_events;
using keel::toolcall::make_output_parser;
using keel::toolcall::OutputParserOptions;
using keel::toolcall::ParseEvent;
using keel::toolcall::ToolCallFormat;

// One line per event: "T|text", "R|text", "C|name|{args}" for a parsed call, "P|name|problem"
// for one that did not parse and "X|name|problem" for one cut off.
std::string describe(const ParseEvent& e) {
  switch (e.kind) {
    case ParseEvent::Kind::Text: return "T|" + e.text;
    case ParseEvent::Kind::Reasoning: return "R|" + e.text;
    case ParseEvent::Kind::Call: break;
  }
  const auto& c = e.call;
  if (c.truncated) return "X|" + c.name;
  if (!c.problem.empty()) return "P|" + c.name;
  return "C|" + c.name + "|" + c.arguments.dump() + (c.arguments_are_strings ? " (strings)" : "");
}

std::vector<std::string> describe_all(const std::vector<ParseEvent>& events) {
  std::vector<std::string> out;
  for (const ParseEvent& e : coalesce_events(events)) out.push_back(describe(e));
  return out;
}

// Full detail, raw text and problems included, for the split comparisons.
std::string detail(const std::vector<ParseEvent>& events) {
  std::string out;
  for (const ParseEvent& e : coalesce_events(events)) {
    out += describe(e);
    if (e.kind == ParseEvent::Kind::Call) out += " raw=" + e.call.raw + " problem=" + e.call.problem;
    out += "\n";
  }
  return out;
}

std::vector<ParseEvent> feed_pieces(const OutputParserOptions& options, const std::vector<std::string_view>& pieces) {
  std::vector<ParseEvent> events;
  auto parser = make_output_parser(options);
  for (std::string_view p : pieces) parser->feed(p, events);
  parser->finish(events);
  return events;
}

// Checks one output: the expected events, and the same events under every split.
void check_output(const OutputParserOptions& options, std::string_view output, const std::vector<std::string>& expected) {
  SCOPED_TRACE(std::string(output));
  const std::vector<ParseEvent> whole = feed_pieces(options, {output});
  EXPECT_EQ(describe_all(whole), expected);
  const std::string want = detail(whole);
  for (size_t k = 0; k <= output.size(); ++k) {
    ASSERT_EQ(detail(feed_pieces(options, {output.substr(0, k), output.substr(k)})), want) << "split at byte " << k;
  }
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < output.size(); ++i) bytes.push_back(output.substr(i, 1));
  ASSERT_EQ(detail(feed_pieces(options, bytes)), want) << "byte by byte";
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    std::vector<std::string_view> pieces;
    for (size_t i = 0; i < output.size();) {
      const size_t n = 1 + rng() % 7;
      pieces.push_back(output.substr(i, n));
      i += n;
    }
    ASSERT_EQ(detail(feed_pieces(options, pieces)), want) << "random pieces, round " << round;
  }
}

OutputParserOptions with(ToolCallFormat format, bool reasoning = false, bool starts_in_reasoning = false) {
  OutputParserOptions o;
  o.format = format;
  o.reasoning = reasoning;
  o.starts_in_reasoning = starts_in_reasoning;
  return o;
}

const auto kHermes = ToolCallFormat::Hermes;

// --- Hermes / Qwen2.5 / Qwen3 ---

TEST(ToolcallHermes, SingleCall) {
  check_output(with(kHermes), "<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"ls /tmp\"}}\n</tool_call>",
               {R"(C|Bash|{"command":"ls /tmp"})"});
}

TEST(ToolcallHermes, TextBeforeAndAfter) {
  check_output(with(kHermes),
               "Let me look.\n<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>\nDone.",
               {"T|Let me look.", R"(C|Bash|{"command":"ls"})", "T|Done."});
}

TEST(ToolcallHermes, TwoCallsToTheSameToolKeepTheirOrder) {
  check_output(with(kHermes),
               "Reading both.\n<tool_call>\n{\"name\": \"Read\", \"arguments\": {\"file_path\": \"/a\"}}\n</tool_call>\n"
               "<tool_call>\n{\"name\": \"Read\", \"arguments\": {\"file_path\": \"/b\"}}\n</tool_call>",
               {"T|Reading both.", R"(C|Read|{"file_path":"/a"})", R"(C|Read|{"file_path":"/b"})"});
}

TEST(ToolcallHermes, NestedJsonKeepsKeyOrder) {
  check_output(with(kHermes),
               "<tool_call>\n{\"name\": \"Edit\", \"arguments\": {\"z\": 1, \"edits\": [{\"old\": \"a\", \"new\": {\"y\": [1, 2.5, "
               "null, true]}}], \"a\": {}}}\n</tool_call>",
               {R"(C|Edit|{"z":1,"edits":[{"old":"a","new":{"y":[1,2.5,null,true]}}],"a":{}})"});
}

TEST(ToolcallHermes, ClosingMarkerInsideAJsonString) {
  check_output(with(kHermes),
               "<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"echo '</tool_call>' > f\"}}\n</tool_call>after",
               {R"(C|Bash|{"command":"echo '</tool_call>' > f"})", "T|after"});
}

TEST(ToolcallHermes, Unicode) {
  check_output(with(kHermes),
               "Ünïcödé ✓ 😀\n<tool_call>\n{\"name\": \"Write\", \"arguments\": {\"text\": \"日本語 ✓ \\u00e9\"}}\n</tool_call>",
               {"T|Ünïcödé ✓ 😀", "C|Write|{\"text\":\"日本語 ✓ é\"}"});
}

TEST(ToolcallHermes, TruncatedCall) {
  check_output(with(kHermes), "Sure.\n<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"ls",
               {"T|Sure.", "X|Bash"});
  const auto events = keel::toolcall::parse_output(with(kHermes), "<tool_call>\n{\"name\": \"Bash\", \"argu");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].call.truncated);
  EXPECT_NE(events[0].call.problem.find("ended inside the tool call"), std::string::npos);
  EXPECT_EQ(events[0].call.raw, "<tool_call>\n{\"name\": \"Bash\", \"argu");
}

TEST(ToolcallHermes, MalformedJsonIsReportedAndTextAfterKept) {
  check_output(with(kHermes),
               "<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"ls\"}\n</tool_call>\nafter",
               {"P|Bash", "T|after"});
  const auto events = keel::toolcall::parse_output(with(kHermes), "<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"a\": tru}}\n</tool_call>");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].call.problem.rfind("arguments are not valid JSON", 0), 0u) << events[0].call.problem;
  EXPECT_FALSE(events[0].call.truncated);
}

TEST(ToolcallHermes, RawIsTheExactText) {
  const std::string call = "<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>";
  const auto events = keel::toolcall::parse_output(with(kHermes), "x\n" + call + "\ny");
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1].call.raw, call);
  EXPECT_TRUE(events[1].call.problem.empty());
  EXPECT_FALSE(events[1].call.arguments_are_strings);
}

TEST(ToolcallHermes, ArgumentsAsAJsonString) {
  check_output(with(kHermes), "<tool_call>\n{\"name\": \"Bash\", \"arguments\": \"{\\\"command\\\": \\\"ls\\\"}\"}\n</tool_call>",
               {R"(C|Bash|{"command":"ls"})"});
}

TEST(ToolcallHermes, MissingCloseTagAtEndOfOutput) {
  check_output(with(kHermes), "<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"ls\"}}\n",
               {R"(C|Bash|{"command":"ls"})"});
}

TEST(ToolcallHermes, MarkerLookalikesStayText) {
  check_output(with(kHermes), "Use <tool_calls> or <tool_ or a < b and {x} here\n{not json}",
               {"T|Use <tool_calls> or <tool_ or a < b and {x} here\n{not json}"});
  check_output(with(kHermes), "ends with <tool_", {"T|ends with <tool_"});
}

// --- bare JSON, every format ---

TEST(ToolcallBareJson, AtStartOfOutput) {
  check_output(with(kHermes), "{\"name\": \"Bash\", \"arguments\": {\"command\": \"ls\"}}", {R"(C|Bash|{"command":"ls"})"});
  check_output(with(ToolCallFormat::None), "  {\"name\": \"Read\", \"parameters\": {\"file_path\": \"/a\"}}",
               {R"(C|Read|{"file_path":"/a"})"});
}

TEST(ToolcallBareJson, AtStartOfALineAfterText) {
  check_output(with(ToolCallFormat::Mistral), "I will run it.\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"ls\"}}\nok",
               {"T|I will run it.", R"(C|Bash|{"command":"ls"})", "T|ok"});
}

TEST(ToolcallBareJson, ObjectThatIsNotACallIsTextUnchanged) {
  check_output(with(kHermes), "Here:\n{\"name\": \"keel\", \"version\": 1}\nok",
               {"T|Here:\n{\"name\": \"keel\", \"version\": 1}\nok"});
  check_output(with(kHermes), "{\n  \"a\": [1, 2],\n  \"b\": \"c\"\n}", {"T|{\n  \"a\": [1, 2],\n  \"b\": \"c\"\n}"});
}

TEST(ToolcallBareJson, MidLineObjectIsText) {
  check_output(with(kHermes), "Call {\"name\": \"Bash\", \"arguments\": {}} like that",
               {"T|Call {\"name\": \"Bash\", \"arguments\": {}} like that"});
}

TEST(ToolcallBareJson, TruncatedCallVersusTruncatedObject) {
  check_output(with(kHermes), "{\"name\": \"Bash\", \"arguments\": {\"comm", {"X|Bash"});
  check_output(with(kHermes), "{\"name\": \"Ba", {"T|{\"name\": \"Ba"});
  check_output(with(kHermes), "{\"title\": \"x", {"T|{\"title\": \"x"});
}

// --- Qwen3-Coder XML ---

const auto kXml = ToolCallFormat::Qwen3CoderXml;

TEST(ToolcallQwen3CoderXml, SingleCall) {
  check_output(with(kXml),
               "<tool_call>\n<function=Bash>\n<parameter=command>\nls /tmp\n</parameter>\n</function>\n</tool_call>",
               {R"(C|Bash|{"command":"ls /tmp"} (strings))"});
}

TEST(ToolcallQwen3CoderXml, MultilineValuesAndTwoCalls) {
  check_output(with(kXml),
               "Writing.\n\n<tool_call>\n<function=Write>\n<parameter=path>\n/a.py\n</parameter>\n<parameter=content>\n"
               "def f():\n    return 1\n\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=Write>\n"
               "<parameter=path>\n/b.py\n</parameter>\n<parameter=content>\nx = 2\n</parameter>\n</function>\n</tool_call>",
               {"T|Writing.", R"(C|Write|{"path":"/a.py","content":"def f():\n    return 1\n"} (strings))",
                R"(C|Write|{"path":"/b.py","content":"x = 2"} (strings))"});
}

TEST(ToolcallQwen3CoderXml, ClosingMarkersInsideAValue) {
  check_output(with(kXml),
               "<tool_call>\n<function=Write>\n<parameter=content>\na</parameter> b </tool_call> c\n</parameter>\n"
               "</function>\n</tool_call>done",
               {R"(C|Write|{"content":"a</parameter> b </tool_call> c"} (strings))", "T|done"});
}

TEST(ToolcallQwen3CoderXml, UnicodeAndEmptyValue) {
  check_output(with(kXml),
               "<tool_call>\n<function=Note>\n<parameter=text>\nÜ ✓ 😀\n</parameter>\n<parameter=tag>\n</parameter>\n"
               "</function>\n</tool_call>",
               {"C|Note|{\"text\":\"Ü ✓ 😀\",\"tag\":\"\"} (strings)"});
}

TEST(ToolcallQwen3CoderXml, TruncatedInsideAValue) {
  check_output(with(kXml), "<tool_call>\n<function=Write>\n<parameter=content>\nhalf a fi", {"X|Write"});
}

TEST(ToolcallQwen3CoderXml, MalformedBody) {
  check_output(with(kXml), "<tool_call>\n<function=Bash>\n<oops>\n</function>\n</tool_call>\nnext",
               {"P|Bash", "T|next"});
}

TEST(ToolcallQwen3CoderXml, JsonBodyAndUnwrappedFunction) {
  check_output(with(kXml), "<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>",
               {R"(C|Bash|{"command":"ls"})"});
  check_output(with(kXml), "<function=Bash>\n<parameter=command>\npwd\n</parameter>\n</function>",
               {R"(C|Bash|{"command":"pwd"} (strings))"});
}

// --- Llama 3.x JSON ---

const auto kLlama = ToolCallFormat::Llama3Json;

TEST(ToolcallLlama3, PythonTagAndBare) {
  check_output(with(kLlama), "<|python_tag|>{\"name\": \"Bash\", \"parameters\": {\"command\": \"ls\"}}",
               {R"(C|Bash|{"command":"ls"})"});
  check_output(with(kLlama), "{\"name\": \"Bash\", \"parameters\": {\"command\": \"ls\"}}", {R"(C|Bash|{"command":"ls"})"});
}

TEST(ToolcallLlama3, CallsSeparatedBySemicolons) {
  check_output(with(kLlama),
               "{\"name\": \"Read\", \"parameters\": {\"file_path\": \"/a\"}}; {\"name\": \"Read\", \"parameters\": "
               "{\"file_path\": \"/b\"}}",
               {R"(C|Read|{"file_path":"/a"})", R"(C|Read|{"file_path":"/b"})"});
}

TEST(ToolcallLlama3, NestedUnicodeTruncatedMalformed) {
  check_output(with(kLlama), "{\"name\": \"Q\", \"parameters\": {\"q\": {\"x\": [\"é\", \"}\"]}}}",
               {R"(C|Q|{"q":{"x":["é","}"]}})"});
  check_output(with(kLlama), "<|python_tag|>{\"name\": \"Bash\", \"parameters\": {\"command\": \"l", {"X|Bash"});
  check_output(with(kLlama), "<|python_tag|>{\"name\": \"Bash\", \"parameters\": {\"command\": ls}}", {"P|Bash", "T|ls}}"});
}

TEST(ToolcallLlama3, PythonTagCodeIsText) {
  check_output(with(kLlama), "<|python_tag|>print(1)", {"T|<|python_tag|>print(1)"});
}

// --- Mistral ---

const auto kMistral = ToolCallFormat::Mistral;

TEST(ToolcallMistral, NameArgsForm) {
  check_output(with(kMistral), "[TOOL_CALLS]Bash[ARGS]{\"command\": \"ls /tmp\"}", {R"(C|Bash|{"command":"ls /tmp"})"});
  check_output(with(kMistral), "[TOOL_CALLS]Bash[CALL_ID]abc123def[ARGS]{\"command\": \"ls\"}", {R"(C|Bash|{"command":"ls"})"});
}

TEST(ToolcallMistral, RepeatedCallsAfterText) {
  check_output(with(kMistral),
               "Reading both.[TOOL_CALLS]Read[ARGS]{\"file_path\": \"/etc/hosts\"}[TOOL_CALLS]Read[ARGS]{\"file_path\": "
               "\"/etc/[TOOL_CALLS]\"}",
               {"T|Reading both.", R"(C|Read|{"file_path":"/etc/hosts"})", R"(C|Read|{"file_path":"/etc/[TOOL_CALLS]"})"});
}

TEST(ToolcallMistral, ArrayForm) {
  check_output(with(kMistral),
               "[TOOL_CALLS][{\"name\": \"Read\", \"arguments\": {\"file_path\": \"/a\"}, \"id\": \"abc123def\"}, {\"name\": "
               "\"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": [1, 2]}, \"id\": \"abc123deg\"}]",
               {R"(C|Read|{"file_path":"/a"})", R"(C|get_weather|{"city":"Oslo","days":[1,2]})"});
}

TEST(ToolcallMistral, TruncatedAndMalformed) {
  check_output(with(kMistral), "[TOOL_CALLS]Bash[ARGS]{\"command\": \"ls", {"X|Bash"});
  check_output(with(kMistral), "[TOOL_CALLS]Bash[ARGS]{\"command\": ls}", {"P|Bash", "T|ls}"});
  check_output(with(kMistral), "[TOOL_CALLS][{\"name\": \"Read\"", {"X|Read"});
}

// --- DeepSeek V3 / V3.1 ---

const auto kDeepSeek = ToolCallFormat::DeepSeek;

TEST(ToolcallDeepSeek, V3Shape) {
  check_output(with(kDeepSeek),
               "Listing.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>Bash\n```json\n{\"command\": \"ls "
               "/tmp\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>Bash\n```json\n{\"command\": "
               "\"echo '<｜tool▁call▁end｜>'\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
               {"T|Listing.", R"(C|Bash|{"command":"ls /tmp"})", R"(C|Bash|{"command":"echo '<｜tool▁call▁end｜>'"})"});
}

TEST(ToolcallDeepSeek, V31Shape) {
  check_output(with(kDeepSeek),
               "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>Read<｜tool▁sep｜>{\"file_path\": \"/é\", \"n\": {\"a\": "
               "[1]}}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
               {R"(C|Read|{"file_path":"/é","n":{"a":[1]}})"});
}

TEST(ToolcallDeepSeek, TruncatedAndMalformed) {
  check_output(with(kDeepSeek), "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>Bash\n```json\n{\"comm",
               {"X|Bash"});
  check_output(with(kDeepSeek),
               "<｜tool▁call▁begin｜>Bash<｜tool▁sep｜>{\"command\": }<｜tool▁call▁end｜>after",
               {"P|Bash", "T|after"});
}

TEST(ToolcallDeepSeek, ReasoningThenCall) {
  check_output(with(kDeepSeek, true, true),
               "I need ls.\n</think>\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>Bash<｜tool▁sep｜>{\"command\": "
               "\"ls\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
               {"R|I need ls.", R"(C|Bash|{"command":"ls"})"});
}

// --- gpt-oss Harmony ---

const auto kHarmony = ToolCallFormat::Harmony;

TEST(ToolcallHarmony, AnalysisThenCall) {
  check_output(with(kHarmony),
               "<|channel|>analysis<|message|>Need to list files.<|end|><|start|>assistant<|channel|>commentary "
               "to=functions.Bash <|constrain|>json<|message|>{\"command\": \"ls /tmp\"}<|call|>",
               {"R|Need to list files.", R"(C|Bash|{"command":"ls /tmp"})"});
}

TEST(ToolcallHarmony, RecipientBeforeChannelAsTheTemplateRendersIt) {
  check_output(with(kHarmony), " to=functions.Read<|channel|>commentary json<|message|>{\"file_path\": \"/etc/hosts\"}<|call|>",
               {R"(C|Read|{"file_path":"/etc/hosts"})"});
}

TEST(ToolcallHarmony, FinalAnswer) {
  check_output(with(kHarmony),
               "<|channel|>analysis<|message|>2+2 is 4.<|end|><|start|>assistant<|channel|>final<|message|>The answer is "
               "4 ✓.<|return|>",
               {"R|2+2 is 4.", "T|The answer is 4 ✓."});
}

TEST(ToolcallHarmony, MarkerInsideArgumentsTruncatedAndMalformed) {
  check_output(with(kHarmony),
               "<|channel|>commentary to=functions.Bash <|constrain|>json<|message|>{\"command\": \"echo '<|call|>'\"}<|call|>",
               {R"(C|Bash|{"command":"echo '<|call|>'"})"});
  check_output(with(kHarmony), "<|channel|>commentary to=functions.Bash json<|message|>{\"command\": \"l", {"X|Bash"});
  check_output(with(kHarmony), "<|channel|>commentary to=functions.Bash json<|message|>{command: 1}<|call|>", {"P|Bash"});
}

TEST(ToolcallHarmony, PreambleOnCommentaryIsText) {
  check_output(with(kHarmony),
               "<|channel|>commentary<|message|>Checking two files.<|end|><|start|>assistant<|channel|>commentary "
               "to=functions.Read json<|message|>{\"file_path\": \"/a\"}<|call|>",
               {"T|Checking two files.", R"(C|Read|{"file_path":"/a"})"});
}

// --- Gemma 4 ---

const auto kGemma = ToolCallFormat::Gemma4;

TEST(ToolcallGemma4, SingleCall) {
  check_output(with(kGemma), "<|tool_call>call:Bash{command:<|\"|>ls /tmp<|\"|>}<tool_call|>", {R"(C|Bash|{"command":"ls /tmp"})"});
}

TEST(ToolcallGemma4, TwoCallsThenText) {
  check_output(with(kGemma),
               "<|tool_call>call:Read{file_path:<|\"|>/etc/hosts<|\"|>}<tool_call|><|tool_call>call:get_weather{city:<|\"|>"
               "Oslo<|\"|>,days:[1,2]}<tool_call|>Reading both.",
               {R"(C|Read|{"file_path":"/etc/hosts"})", R"(C|get_weather|{"city":"Oslo","days":[1,2]})", "T|Reading both."});
}

TEST(ToolcallGemma4, NestedValuesAndMarkersInStrings) {
  check_output(with(kGemma),
               "<|tool_call>call:Q{opts:{depth:3,all:true,ratio:-0.5,none:null},names:[<|\"|>a}<|\"|>,<|\"|><tool_call|> "
               "é<|\"|>]}<tool_call|>",
               {R"(C|Q|{"opts":{"depth":3,"all":true,"ratio":-0.5,"none":null},"names":["a}","<tool_call|> é"]})"});
}

TEST(ToolcallGemma4, CollapsedOpener) {
  check_output(with(kGemma), "<tool_call:Bash{command:<|\"|>ls<|\"|>}", {R"(C|Bash|{"command":"ls"})"});
  check_output(with(kGemma), "Sure.<tool_call:Bash{command:<|\"|>ls<|\"|>}<tool_call|>ok",
               {"T|Sure.", R"(C|Bash|{"command":"ls"})", "T|ok"});
}

TEST(ToolcallGemma4, TruncatedAndMalformed) {
  check_output(with(kGemma), "<|tool_call>call:Bash{command:<|\"|>ls /t", {"X|Bash"});
  check_output(with(kGemma), "<|tool_call>call:Bash{command::}<tool_call|>after", {"P|Bash", "T|after"});
}

}  // namespace
