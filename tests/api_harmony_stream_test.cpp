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

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "keel/api/sse_writer.h"
#include "keel/engine/chat_turn.h"
#include "keel/kv/kv_footprint.h"
#include "keel/toolcall/output_syntax.h"
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
    ServedModelOptions o;
    o.dir = dir.path();
    o.threads = 1;  // its matmuls are too small to share; one thread is faster
    o.tool_call_format = toolcall::ToolCallFormat::Harmony;
    return o;
  }());
  return model;
}

json bash_tool() {
  return json::parse(R"([{"type":"function","function":{"name":"Bash","description":"Run a command",
    "parameters":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}}])");
}

constexpr std::string_view kTurnEnders[] = {"<|call|>", "<|return|>"};

// A cut inside a control token would make the model write it as plain text, which gpt-oss never does.
bool inside_control_token(const std::string& output, size_t cut) {
  for (std::string_view t : kTurnEnders) {
    for (size_t at = output.find(t); at != std::string::npos; at = output.find(t, at + 1))
      if (cut > at && cut < at + t.size()) return true;
  }
  return false;
}

// The model's tokens: `output` cut at each of `cuts` (ascending), each piece encoded alone, then
// `after`, which a model that missed the end of its turn would go on to write.
std::vector<int32_t> script_tokens(const std::string& output, const std::vector<size_t>& cuts, const std::string& after) {
  const text::Tokenizer& tok = harmony_model().tokenizer();
  std::vector<std::string> pieces;
  size_t from = 0;
  for (size_t cut : cuts) {
    pieces.push_back(output.substr(from, cut - from));
    from = cut;
  }
  pieces.push_back(output.substr(from));
  pieces.push_back(after);
  std::vector<int32_t> ids;
  for (const std::string& piece : pieces) {
    const std::vector<int32_t> more = tok.encode(piece);
    ids.insert(ids.end(), more.begin(), more.end());
  }
  return ids;
}

struct Turn {
  TurnResult result;
  std::vector<TurnEvent> events;
};

SessionCache make_session() {
  const ModelSpec& spec = harmony_model().weights().spec;
  const int64_t context = 2048;
  const auto budget = static_cast<int64_t>(kv::kv_bytes_per_token(spec, kv::KvPolicy(), context) * context) * 2;
  return SessionCache(spec, budget, kv::KvPolicy(), true, context);
}

// Runs one turn in which the model writes `script` (indexed by position, so a regenerated call
// comes out the same), then its end of sequence. The session keeps the prompt cached between runs.
Turn run_scripted(SessionCache& session, const std::vector<int32_t>& script) {
  ServedModel& model = harmony_model();
  static const PreparedPrompt prompt =
      model.prepare(json::parse(R"([{"role":"user","content":"List the files."}])"), bash_tool(), false);
  TurnOptions o;
  o.max_tokens = static_cast<int64_t>(script.size()) + 16;
  o.tools = bash_tool();
  o.reasoning = true;
  const int32_t eos = model.weights().eos_token_ids.front();
  o.logits_processor = [&](std::span<const int32_t> generated, std::span<float> logits) {
    const int32_t next = generated.size() < script.size() ? script[generated.size()] : eos;
    for (float& l : logits) l = 0.0f;
    logits[static_cast<size_t>(next)] = 100.0f;
  };
  Turn t;
  t.result = run_turn(model, session, prompt, o, [&](TurnEvent&& e) { t.events.push_back(std::move(e)); });
  return t;
}

api::FinishReason finish_reason(TurnFinish f) {
  switch (f) {
    case TurnFinish::ToolUse: return api::FinishReason::ToolUse;
    case TurnFinish::MaxTokens:
    case TurnFinish::ContextFull: return api::FinishReason::MaxTokens;
    case TurnFinish::StopSequence: return api::FinishReason::StopSequence;
    default: return api::FinishReason::EndTurn;
  }
}

std::string stream(api::Protocol protocol, const Turn& turn) {
  auto writer = api::make_stream_writer(protocol, false, 0);
  std::string sse = writer->start("msg_1", "harmony", api::Usage{});
  int calls = 0;
  for (const TurnEvent& e : turn.events) {
    if (e.kind == TurnEvent::Kind::Text) sse += writer->text(e.text);
    if (e.kind == TurnEvent::Kind::Reasoning) sse += writer->thinking(e.text);
    if (e.kind == TurnEvent::Kind::ToolCall) sse += writer->tool_use("call_" + std::to_string(++calls), e.name, e.arguments);
  }
  return sse + writer->finish(finish_reason(turn.result.finish), turn.result.stop_sequence, api::Usage{});
}

// The streamed content as "thinking: ...", "text: ...", "tool_use: NAME {args}" in order, then
// "stop: REASON".
std::vector<std::string> anthropic_content(const std::string& sse) {
  const json message = replay_anthropic_stream(parse_sse(sse));
  std::vector<std::string> out;
  for (const json& block : message.at("content")) {
    const std::string type = block.at("type");
    if (type == "thinking") out.push_back("thinking: " + block.at("thinking").get<std::string>());
    if (type == "text") out.push_back("text: " + block.at("text").get<std::string>());
    if (type == "tool_use") out.push_back("tool_use: " + block.at("name").get<std::string>() + " " + block.at("input").dump());
  }
  out.push_back("stop: " + message.at("stop_reason").get<std::string>());
  return out;
}

// The same from OpenAI chunks: consecutive deltas of one kind joined, a call's argument chunks
// joined to its call. replay_openai_stream checks the chunk grammar.
std::vector<std::string> openai_content(const std::string& sse) {
  const std::vector<SseEvent> events = parse_sse(sse);
  const json whole = replay_openai_stream(events);
  std::vector<std::string> out;
  std::string last_kind;
  auto append = [&](const std::string& kind, const std::string& text) {
    if (text.empty()) return;
    if (kind == last_kind && kind != "tool_use") out.back() += text;
    else out.push_back(kind + ": " + text);
    last_kind = kind;
  };
  for (const SseEvent& e : events) {
    if (e.data == "[DONE]") continue;
    const json chunk = json::parse(e.data);
    if (chunk.at("choices").empty()) continue;
    const json& delta = chunk["choices"][0].at("delta");
    if (delta.contains("reasoning_content")) append("thinking", delta["reasoning_content"]);
    if (delta.contains("content") && delta["content"].is_string()) append("text", delta["content"]);
    if (delta.contains("tool_calls")) {
      for (const json& tc : delta["tool_calls"]) {
        if (tc.contains("id")) {
          append("tool_use", tc["function"]["name"].get<std::string>() + " ");
        } else {
          out.back() += tc["function"]["arguments"].get<std::string>();
        }
      }
    }
  }
  const auto calls = std::count_if(out.begin(), out.end(), [](const std::string& s) { return s.starts_with("tool_use: "); });
  EXPECT_EQ(static_cast<size_t>(calls), whole.at("tool_calls").size());
  out.push_back("stop: " + whole.at("finish_reason").get<std::string>());
  return out;
}

// Arguments as the Anthropic replay prints them (parsed) and as OpenAI streams them (the JSON
// text) are the same compact dump, so one expected list serves both; only the stop names differ.
std::vector<std::string> with_stop(std::vector<std::string> content, const std::string& stop) {
  content.push_back("stop: " + stop);
  return content;
}

// Every byte boundary of `output` (but those inside a control token) is a cut in exactly one run.
// A run has kCutsPerRun cuts a quarter of the output apart: every run is a whole turn of the model,
// so covering four boundaries per turn keeps the test fast.
constexpr size_t kCutsPerRun = 4;

// Streams `output` (then `after`) cut at every byte boundary and checks both protocols' content.
void expect_every_cut_streams(const std::string& output, const std::string& after, const std::vector<std::string>& content,
                              const std::string& anthropic_stop, const std::string& openai_stop) {
  const std::vector<std::string> want_anthropic = with_stop(content, anthropic_stop);
  const std::vector<std::string> want_openai = with_stop(content, openai_stop);
  SessionCache session = make_session();
  const size_t stride = output.size() / kCutsPerRun + 1;
  size_t covered = 0;
  for (size_t first = 0; first < stride; ++first) {
    std::vector<size_t> cuts;
    for (size_t cut = first; cut <= output.size(); cut += stride)
      if (!inside_control_token(output, cut)) cuts.push_back(cut);
    covered += cuts.size();
    const Turn turn = run_scripted(session, script_tokens(output, cuts, after));
    ASSERT_EQ(anthropic_content(stream(api::Protocol::Anthropic, turn)), want_anthropic) << "cuts from " << first;
    ASSERT_EQ(openai_content(stream(api::Protocol::OpenAI, turn)), want_openai) << "cuts from " << first;
  }
  size_t control_inner = 0;
  for (size_t cut = 0; cut <= output.size(); ++cut) control_inner += inside_control_token(output, cut) ? 1 : 0;
  EXPECT_EQ(covered + control_inner, output.size() + 1);
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
