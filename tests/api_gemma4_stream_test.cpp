// Gemma 4's output (issue #14), scripted token by token through a real turn (engine/chat_turn:
// output parser, turn ends, schema checks, retries) and streamed through both protocols' writers,
// checked by the strict grammar checkers. Each scripted output is cut at every byte boundary (the
// model writes the pieces as separate tokens; each run cuts at four boundaries,
// scripted_turn_support.h), and every cut must stream the same content: <|channel>thought as
// thinking / reasoning_content, text before and between calls as text, every call as a validated
// tool_use / tool_calls whose arguments are exactly the JSON the script encodes, a malformed call
// never passed on, and nothing after the turn's <|tool_response> or <turn|>.
//
// The model folder is Gemma 4 as far as the output path can tell: the real Gemma 4 chat template
// (shared/fixtures/chat_templates/google-gemma-4-31B-it.jinja, so the format and the thinking
// switch are detected from it, not forced) and a tokenizer carrying Gemma 4's control tokens. The
// fixtures have no Gemma 4 tokenizer.json (262k tokens), so tiny-toolcaller's BPE stands in: its
// five added tokens are renamed to Gemma markers and the others appended, all special, and the
// weights are a one-layer random copy of tiny-toolcaller's shape with a row for each (the script
// decides every token, so the weights only have to run). As in Gemma 4, <|"|>, <|tool_call>,
// <tool_call|>, <|channel> and <channel|> are control tokens the parser consumes
// (toolcall/output_syntax.cpp); <|tool_response>, which the model writes after its calls, is a
// control token that is not output syntax, so the turn ends there
// (generation_config.json lists only <turn|> as end of sequence here).
//
// Cuts fall everywhere except inside <|tool_response> and <turn|>: a piece holding part of
// another marker is written as plain text, which decodes to the same bytes, so those cuts check
// the parser holding a partly written marker.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "keel/arch/synth.h"
#include "keel/toolcall/output_syntax.h"
#include "scripted_turn_support.h"
#include "server_support.h"
#include "tokenizer_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

const char* const kTemplate = "fixtures/chat_templates/google-gemma-4-31B-it.jinja";

ServedModel& gemma_model() {
  static TempDir dir;
  static ServedModel model([] {
    const fs::path src = tiny_toolcaller_dir();
    const fs::path out = dir.path() / "gemma4-scripted";
    const std::map<std::string, int32_t> ids = write_tokenizer_with_specials(
        src / "tokenizer.json", dir.path() / "tokenizer.json",
        {{"<|endoftext|>", "<|tool_response>"}, {"<|im_start|>", "<|turn>"}, {"<|im_end|>", "<turn|>"},
         {"<tool_call>", "<|tool_call>"}, {"</tool_call>", "<tool_call|>"}},
        {"<bos>", "<|\"|>", "<|channel>", "<channel|>", "<|tool>", "<tool|>", "<tool_response|>", "<|think|>"});
    int32_t vocab = 0;
    for (const auto& [text, id] : ids) vocab = std::max(vocab, id + 1);
    json config = json::parse(read_text(src / "config.json"));
    config["vocab_size"] = vocab;
    config["bos_token_id"] = ids.at("<bos>");
    config["eos_token_id"] = ids.at("<turn|>");
    const fs::path config_in = dir.path() / "config.json";
    std::ofstream(config_in) << config.dump(2);
    SynthOptions synth;
    synth.layers = 1;
    synthesize_model(config_in, out, synth);
    fs::copy_file(dir.path() / "tokenizer.json", out / "tokenizer.json");
    std::ofstream(out / "chat_template.jinja") << read_text(shared_dir() / kTemplate);
    std::ofstream(out / "tokenizer_config.json")
        << json{{"bos_token", "<bos>"}, {"eos_token", "<turn|>"}, {"tokenizer_class", "PreTrainedTokenizerFast"}}.dump(2);
    std::ofstream(out / "generation_config.json")
        << json{{"bos_token_id", ids.at("<bos>")}, {"eos_token_id", json::array({ids.at("<turn|>")})}}.dump(2);
    return arch::resolve_model(out);
  }(),
  ServedModelOptions{.threads = 1});  // its matmuls are too small to share; one thread is faster
  return model;
}

json tools() {
  return json::parse(R"([
    {"type":"function","function":{"name":"Bash","description":"Run a command",
      "parameters":{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"integer"}},
                    "required":["command"]}}},
    {"type":"function","function":{"name":"Edit","description":"Edit a file",
      "parameters":{"type":"object","properties":{
        "path":{"type":"string"},
        "edits":{"type":"array","items":{"type":"object","properties":{"old":{"type":"string"},"new":{"type":"string"}},
                                         "required":["old","new"]}},
        "options":{"type":"object"}},
      "required":["path","edits"]}}}])");
}

json conversation() {
  return json::parse(R"([{"role":"system","content":"You are a coding agent."},
                         {"role":"user","content":"Fix the bug in src/main.c, then run the tests."}])");
}

// Thinking off: the generation prompt ends with an empty thought (<|channel>thought\n<channel|>),
// so the model answers at once. Thinking on: it ends with <|turn>model\n and the model may think.
const ScriptedSetup& setup(bool thinking) {
  static const PreparedPrompt off = gemma_model().prepare(conversation(), tools(), false);
  static const PreparedPrompt on = gemma_model().prepare(conversation(), tools(), true);
  static const ScriptedSetup s_off{&gemma_model(), &off, tools(), {"<|tool_response>", "<turn|>"}};
  static const ScriptedSetup s_on{&gemma_model(), &on, tools(), {"<|tool_response>", "<turn|>"}};
  return thinking ? s_on : s_off;
}

// What a model that did not stop at <|tool_response> would write after it: the tool's answer,
// made up, and a reply to it.
const std::string kMadeUpResult = "response:Bash{value:<|\"|>ok<|\"|>}<tool_response|>Tests pass.<turn|>";

std::string call_line(const std::string& name, const json& args) { return "tool_use: " + name + " " + args.dump(); }

// Streams `output` at every cut, checks the content, and checks that every call's arguments, as
// both clients parse them, are exactly `calls` (JSON values, key order included).
void expect_stream(bool thinking, const std::string& output, const std::string& after,
                   const std::vector<std::string>& content, const std::vector<json>& calls,
                   const std::string& anthropic_stop, const std::string& openai_stop) {
  std::vector<ScriptedTurn> turns;
  expect_every_cut_streams(setup(thinking), output, after, content, anthropic_stop, openai_stop, &turns);
  ASSERT_FALSE(turns.empty());
  for (const ScriptedTurn& turn : turns) {
    EXPECT_EQ(anthropic_call_arguments(stream_turn(api::Protocol::Anthropic, turn)), calls);
    EXPECT_EQ(openai_call_arguments(stream_turn(api::Protocol::OpenAI, turn)), calls);
  }
}

TEST(Gemma4Stream, TheModelFolderReadsAsGemma4) {
  const ServedModel& m = gemma_model();
  EXPECT_EQ(m.tool_call_format().format, toolcall::ToolCallFormat::Gemma4);
  EXPECT_EQ(m.reasoning().kind, toolcall::ReasoningKind::Switchable);
  // The markers the script writes are single control tokens, as in Gemma 4.
  for (const char* marker : {"<|tool_call>", "<tool_call|>", "<|\"|>", "<|channel>", "<channel|>", "<|tool_response>"}) {
    const std::vector<int32_t> ids = m.tokenizer().encode(marker);
    ASSERT_EQ(ids.size(), 1u) << marker;
    EXPECT_TRUE(m.tokenizer().is_special(ids[0])) << marker;
  }
  EXPECT_FALSE(toolcall::is_output_syntax(toolcall::ToolCallFormat::Gemma4, "<|tool_response>"));
  EXPECT_TRUE(toolcall::is_output_syntax(toolcall::ToolCallFormat::Gemma4, "<|\"|>"));
}

TEST(Gemma4Stream, NestedArgumentsAndTextBetweenCalls) {
  // Two calls with text before and between them. Strings hold quotes, braces, newlines, an
  // apostrophe, nothing at all, markup right next to <|"|> ("<tag|>", "<|" just before the
  // closing quote) and the call's own closing marker; values nest objects in arrays in objects,
  // with numbers, booleans and null.
  const std::string output =
      "I'll fix it in two places.\n"
      "<|tool_call>call:Edit{edits:[{new:<|\"|>if (x) {\n  say(\"hi\");\n}<|\"|>,old:<|\"|>if(x){say('hi');}<|\"|>},"
      "{new:<|\"|><tag|> a, b: c <|<|\"|>,old:<|\"|><|\"|>}],"
      "options:{context:{lines:3,tags:[<|\"|>x<|\"|>,true,null,-1.5]},dry_run:false,note:<|\"|>not <tool_call|> yet<|\"|>},"
      "path:<|\"|>src/main.c<|\"|>}<tool_call|>"
      "Then the tests.\n"
      "<|tool_call>call:Bash{command:<|\"|>make test && echo \"ok {1}\"<|\"|>,timeout:120}<tool_call|>"
      "<|tool_response>";
  const json edit = json::parse(R"({"edits":[{"new":"if (x) {\n  say(\"hi\");\n}","old":"if(x){say('hi');}"},
                                             {"new":"<tag|> a, b: c <|","old":""}],
                                    "options":{"context":{"lines":3,"tags":["x",true,null,-1.5]},"dry_run":false,
                                               "note":"not <tool_call|> yet"},
                                    "path":"src/main.c"})");
  const json bash = json::parse(R"({"command":"make test && echo \"ok {1}\"","timeout":120})");
  expect_stream(false, output, kMadeUpResult,
                {"text: I'll fix it in two places.", call_line("Edit", edit), "text: Then the tests.", call_line("Bash", bash)},
                {edit, bash}, "tool_use", "tool_calls");
}

TEST(Gemma4Stream, ThoughtThenTextThenCallsEndsAtToolResponse) {
  // Thinking on: the thought channel is reasoning (its name line is syntax), then a preamble and
  // two calls back to back; the made-up tool answer after <|tool_response> never reaches a client.
  const std::string output =
      "<|channel>thought\nThe user wants the bug fixed.\nCheck main.c {braces} and \"quotes\" first.<channel|>"
      "Looking now."
      "<|tool_call>call:Bash{command:<|\"|>cat src/main.c<|\"|>}<tool_call|>"
      "<|tool_call>call:Bash{command:<|\"|>git log -1<|\"|>,timeout:5}<tool_call|>"
      "<|tool_response>";
  const json first = json::parse(R"({"command":"cat src/main.c"})");
  const json second = json::parse(R"({"command":"git log -1","timeout":5})");
  expect_stream(true, output, kMadeUpResult,
                {"thinking: The user wants the bug fixed.\nCheck main.c {braces} and \"quotes\" first.",
                 "text: Looking now.", call_line("Bash", first), call_line("Bash", second)},
                {first, second}, "tool_use", "tool_calls");
}

TEST(Gemma4Stream, ThoughtThenFinalAnswerEndsAtEndOfTurn) {
  // No call: braces and a JSON object in the middle of a line stay text; <turn|> ends the turn.
  const std::string output =
      "<|channel>thought\nAll done already.<channel|>"
      "Fixed: `if (x) { say(\"hi\"); }` now prints {\"ok\": true}.<turn|>";
  expect_stream(true, output, "<|turn>user\nmade up<turn|>",
                {"thinking: All done already.", "text: Fixed: `if (x) { say(\"hi\"); }` now prints {\"ok\": true}."}, {},
                "end_turn", "stop");
}

TEST(Gemma4Stream, MalformedCallIsRetriedThenNotPassedOn) {
  // "command::" has no value. The script writes the same call on every attempt, so it stays
  // invalid: reported as text, never as a call, in the same text block as the text before it. The
  // error names the byte of the call's text where the notation breaks: 12 bytes of <|tool_call>,
  // 5 of "call:", "Bash{command:" -> byte 30.
  const std::string output = "Running it.<|tool_call>call:Bash{command::}<tool_call|><|tool_response>";
  expect_stream(false, output, kMadeUpResult,
                {"text: Running it.[keel: the model's call to \"Bash\" was invalid (arguments are not valid Gemma call "
                 "syntax: expected a value at byte 30) after 2 retries; it was not passed on]"},
                {}, "end_turn", "stop");
}

TEST(Gemma4Stream, CallBreakingItsSchemaIsNotPassedOn) {
  // Well-formed, but Edit requires "edits".
  const std::string output = "<|tool_call>call:Edit{path:<|\"|>src/main.c<|\"|>}<tool_call|><|tool_response>";
  expect_stream(false, output, kMadeUpResult,
                {"text: [keel: the model's call to \"Edit\" was invalid (missing required property \"edits\") after 2 "
                 "retries; it was not passed on]"},
                {}, "end_turn", "stop");
}

}  // namespace
}  // namespace keel::test
