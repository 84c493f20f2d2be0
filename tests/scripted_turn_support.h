#pragma once
// Scripted model output through a real turn (engine/chat_turn: output parser, turn ends, schema
// checks, retries) and both protocols' stream writers, for end-to-end tests of a tool-call format.
// A logits processor makes the model write a fixed token script; the streamed SSE is replayed by
// the strict grammar checkers (stream_grammar_support.cpp) and reduced to its content, so a test
// compares what a client would see. Used by the Harmony and Gemma 4 stream tests.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "keel/api/sse_writer.h"
#include "keel/engine/chat_turn.h"
#include "keel/engine/served_model.h"
#include "keel/engine/session_cache.h"

namespace keel::test {

// One served model, a prompt prepared for it, and the request's tools.
struct ScriptedSetup {
  ServedModel* model = nullptr;
  const PreparedPrompt* prompt = nullptr;
  nlohmann::ordered_json tools;
  // Special tokens the model writes as single control tokens that end its turn: no cut falls
  // inside them (a cut there would make the model write them as plain text, which it never does).
  std::vector<std::string> unsplittable;
};

struct ScriptedTurn {
  TurnResult result;
  std::vector<TurnEvent> events;
};

// A session with room for a 2048-token context on `model`.
SessionCache make_scripted_session(ServedModel& model);

// The model's tokens: `output` cut at each of `cuts` (ascending), each piece encoded alone (special
// tokens written as control tokens), then `after`, which a model that missed the end of its turn
// would go on to write.
std::vector<int32_t> script_tokens(const text::Tokenizer& tok, const std::string& output, const std::vector<size_t>& cuts,
                                   const std::string& after);

// Runs one turn (reasoning on, the setup's tools) in which the model writes `script` (indexed by
// position, so a regenerated call comes out the same), then its end of sequence. The session
// keeps the prompt cached between runs.
ScriptedTurn run_scripted(const ScriptedSetup& setup, SessionCache& session, const std::vector<int32_t>& script);

// The turn streamed through `protocol`'s writer, as keel's endpoints stream it.
std::string stream_turn(api::Protocol protocol, const ScriptedTurn& turn);

// The streamed content as "thinking: ...", "text: ...", "tool_use: NAME {args}" in order, then
// "stop: REASON". The Anthropic form comes from replay_anthropic_stream (arguments as the parsed
// input, dumped compactly), the OpenAI form from the chunks (consecutive deltas of one kind
// joined, a call's argument chunks joined to its call) checked by replay_openai_stream.
std::vector<std::string> anthropic_content(const std::string& sse);
std::vector<std::string> openai_content(const std::string& sse);

// Every call's arguments as a client parses them: Anthropic tool_use inputs and OpenAI
// function.arguments strings, each parsed as JSON (key order kept).
std::vector<nlohmann::ordered_json> anthropic_call_arguments(const std::string& sse);
std::vector<nlohmann::ordered_json> openai_call_arguments(const std::string& sse);

// Every byte boundary of `output` (but those inside an unsplittable token) is a cut in exactly one
// run. A run has kCutsPerRun cuts a quarter of the output apart: every run is a whole turn of the
// model, so covering four boundaries per turn keeps the tests fast.
inline constexpr size_t kCutsPerRun = 4;

// Streams `output` (then `after`) cut at every byte boundary and checks both protocols' content
// (`content` without the stop line; one list serves both, since arguments stream as the same
// compact JSON the Anthropic replay dumps). With `turns`, every run's turn is appended to it for
// further checks.
void expect_every_cut_streams(const ScriptedSetup& setup, const std::string& output, const std::string& after,
                              const std::vector<std::string>& content, const std::string& anthropic_stop,
                              const std::string& openai_stop, std::vector<ScriptedTurn>* turns = nullptr);

}  // namespace keel::test
