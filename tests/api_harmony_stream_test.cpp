// gpt-oss's Harmony output, scripted token by token through a real turn (engine/chat_turn: output
// parser, turn ends, schema checks, retries) and streamed through both protocols' writers. Each
// scripted output is cut at every byte boundary (the model writes the pieces as separate tokens;
// each run cuts at four boundaries), and every cut must stream the same content blocks: analysis
// as thinking, commentary preambles and final as text, calls as validated tool_use / tool_calls,
// an invalid call never passed on, and nothing after the turn's <|call|> or <|return|>.
//
// The model is the bundled tiny-toolcaller, served with --tool-call-format harmony and a
// tokenizer whose two <tool_call> added tokens are renamed <|call|> and <|return|> and marked
// special: like gpt-oss, it writes Harmony's turn-ending markers as single control tokens, which
// its generation_config.json does not list as end of sequence. Its other Harmony markers are plain
// text, which the parser reads the same way.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "keel/toolcall/output_syntax.h"
#include "scripted_turn_support.h"
#include "server_support.h"
#include "tokenizer_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;

ServedModel& harmony_model() {
  static TempDir dir;
  static ServedModel model([] {
    const auto src = tiny_toolcaller_dir();
    for (const char* f : {"config.json", "generation_config.json", "model.safetensors", "tokenizer_config.json"})
      std::filesystem::copy_file(src / f, dir.path() / f);
    write_tokenizer_with_specials(src / "tokenizer.json", dir.path() / "tokenizer.json",
                                  {{"<tool_call>", "<|call|>"}, {"</tool_call>", "<|return|>"}});
    return arch::resolve_model(dir.path());
  }(),
  // Its matmuls are too small to share; one thread is faster.
  ServedModelOptions{.threads = 1, .tool_call_format = toolcall::ToolCallFormat::Harmony});
  return model;
}

json bash_tool() {
  return json::parse(R"([{"type":"function","function":{"name":"Bash","description":"Run a command",
    "parameters":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}}])");
}

constexpr std::string_view kTurnEnders[] = {"<|call|>", "<|return|>"};

// The turn's setup: a plain user question with the Bash tool. A cut inside a control token would
// make the model write it as plain text, which gpt-oss never does.
const ScriptedSetup& setup() {
  static const PreparedPrompt prompt =
      harmony_model().prepare(json::parse(R"([{"role":"user","content":"List the files."}])"), bash_tool(), false);
  static const ScriptedSetup s{&harmony_model(), &prompt, bash_tool(), {std::string(kTurnEnders[0]), std::string(kTurnEnders[1])}};
  return s;
}

// Streams `output` (then `after`) cut at every byte boundary and checks both protocols' content
// (scripted_turn_support.h).
void expect_every_cut_streams(const std::string& output, const std::string& after, const std::vector<std::string>& content,
                              const std::string& anthropic_stop, const std::string& openai_stop) {
  keel::test::expect_every_cut_streams(setup(), output, after, content, anthropic_stop, openai_stop);
}

// What a model that did not stop at <|call|> would write next: the tool's answer, made up.
const std::string kMadeUpResult =
    "<|start|>functions.Bash to=assistant<|channel|>commentary<|message|>\"a.txt\"<|end|>"
    "<|start|>assistant<|channel|>final<|message|>There is a.txt.<|return|>";

TEST(HarmonyStream, AnalysisPreambleAnalysisThenCallEndsAtCall) {
  const std::string output =
      "<|channel|>analysis<|message|>The user wants the files.<|end|>"
      "<|start|>assistant<|channel|>commentary<|message|>Let me look.<|end|>"
      "<|start|>assistant<|channel|>analysis<|message|>Use ls -la.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.Bash <|constrain|>json<|message|>{\"command\":\"ls -la\"}<|call|>";
  expect_every_cut_streams(output, kMadeUpResult,
                           {"thinking: The user wants the files.", "text: Let me look.", "thinking: Use ls -la.",
                            R"(tool_use: Bash {"command":"ls -la"})"},
                           "tool_use", "tool_calls");
}

TEST(HarmonyStream, CallsClosedByEndInterleaveWithAnalysis) {
  // A call closed by <|end|> does not end the turn; both header shapes name the tool.
  const std::string output =
      "<|channel|>analysis<|message|>Two steps.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.Bash <|constrain|>json<|message|>{\"command\":\"pwd\"}<|end|>"
      "<|start|>assistant<|channel|>analysis<|message|>Now list.<|end|>"
      "<|start|>assistant to=functions.Bash<|channel|>commentary json<|message|>{\"command\":\"ls\"}<|call|>";
  expect_every_cut_streams(output, kMadeUpResult,
                           {"thinking: Two steps.", R"(tool_use: Bash {"command":"pwd"})", "thinking: Now list.",
                            R"(tool_use: Bash {"command":"ls"})"},
                           "tool_use", "tool_calls");
}

TEST(HarmonyStream, InvalidCallIsRetriedThenNotPassedOn) {
  // The script writes the same call on every attempt, so it stays invalid.
  const std::string output =
      "<|channel|>analysis<|message|>Run it.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.Bash <|constrain|>json<|message|>{\"cmd\":\"ls\"}<|call|>";
  expect_every_cut_streams(output, kMadeUpResult,
                           {"thinking: Run it.",
                            "text: [keel: the model's call to \"Bash\" was invalid (missing required property "
                            "\"command\") after 2 retries; it was not passed on]"},
                           "end_turn", "stop");
}

TEST(HarmonyStream, FinalIsTextAndReturnEndsTheTurn) {
  const std::string output =
      "<|channel|>analysis<|message|>Simple sum.<|end|>"
      "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>";
  expect_every_cut_streams(output, "<|start|>assistant<|channel|>final<|message|>Again.<|return|>",
                           {"thinking: Simple sum.", "text: 2 + 2 = 4."}, "end_turn", "stop");
}

TEST(HarmonyStream, OnlyHarmonyEndsTurnsAtCallAndReturn) {
  using toolcall::ToolCallFormat;
  for (std::string_view t : kTurnEnders) {
    EXPECT_TRUE(toolcall::ends_turn(ToolCallFormat::Harmony, t)) << t;
    EXPECT_FALSE(toolcall::ends_turn(ToolCallFormat::Hermes, t)) << t;
  }
  EXPECT_FALSE(toolcall::ends_turn(ToolCallFormat::Harmony, "<|end|>"));
  EXPECT_FALSE(toolcall::ends_turn(ToolCallFormat::Harmony, "<|channel|>"));
}

}  // namespace
}  // namespace keel::test
