#pragma once
// Constrained decoding for one turn: grammars that decide which tokens the model may sample.
//   - Structured output (OpenAI response_format / text.format, Anthropic output_config.format):
//     the answer, after any reasoning, is one JSON value of the schema, then the turn ends.
//   - Tool calls: once a call opens in the model's format, its arguments follow the tool's
//     input_schema, in that format's syntax. Formats keel constrains: Hermes/Qwen
//     (<tool_call>{"name", "arguments"}), Qwen3-Coder XML (<tool_call><function=NAME>
//     <parameter=KEY>...), Llama 3 JSON ({"name", "parameters"}), Mistral ([TOOL_CALLS] and an
//     array of calls, or NAME[ARGS]{arguments}) and Harmony (to=functions.NAME ...
//     <|message|>{arguments}) and Gemma 4 (<|tool_call>call:NAME{key:<|"|>text<|"|>,...}).
//     DeepSeek's are checked after the fact only (validation and retry, chat_turn.h), as are
//     schema keywords no grammar enforces.
// Grammars are compiled on the request's thread (CallGrammars, compile_answer_grammar); the
// OutputConstrainer runs them on the engine thread, one per turn.
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "keel/constrain/grammar.h"
#include "keel/constrain/token_mask.h"
#include "keel/toolcall/format_detect.h"

namespace keel {

// What one request constrains, compiled: shared by the turn's retries and read-only.
struct OutputGrammars {
  // The whole answer: leading whitespace, then the schema's value. Null: free text.
  std::shared_ptr<const constrain::Grammar> answer;
  // Every call the model may write in its format, from where the call opens (after the format's
  // call marker): null when calls are not constrained.
  std::shared_ptr<const constrain::Grammar> any_call;
  // Harmony, Mistral's NAME[ARGS] form: each tool's arguments alone (the format names the tool
  // before they begin).
  std::map<std::string, std::shared_ptr<const constrain::Grammar>> arguments;
  // Tools whose schema the compiler refused: their calls are only validated ("Bash: ...").
  std::vector<std::string> unconstrained_tools;
};

// The answer grammar for a JSON schema; any_object_grammar for json_object. `where` names the
// schema in errors. Throws constrain::SchemaError for what it cannot compile, and for keywords the
// grammar would not enforce (nothing checks a structured answer afterwards). The grammars of the
// kRecent schemas asked for last are kept and shared, with their cached masks. Thread-safe.
std::shared_ptr<const constrain::Grammar> compile_answer_grammar(const nlohmann::ordered_json& schema,
                                                                 const std::string& where);
std::shared_ptr<const constrain::Grammar> any_object_grammar();

// Call grammars for `tools` (function form) in `format`; `include(name)` says which tools are
// constrained (strict). Never throws on a tool's schema: a tool it cannot compile takes any
// arguments object and is listed in unconstrained_tools. No grammar for formats keel does not
// constrain.
void add_call_grammars(OutputGrammars& grammars, toolcall::ToolCallFormat format, const nlohmann::ordered_json& tools,
                       const std::function<bool(const std::string&)>& include);

// The call grammars of the tool sets requests sent lately: an agent sends the same tools every
// turn, so they compile once and their masks (cached on the grammar) are computed once. Keeps the
// kRecent most recent. Thread-safe (HTTP threads).
class CallGrammarCache {
 public:
  static constexpr size_t kRecent = 16;
  // The call grammars (add_call_grammars) of `tools` in `format`, a tool constrained when
  // `strict` says so, else when `default_on`. Null when none is constrained.
  std::shared_ptr<const OutputGrammars> get(toolcall::ToolCallFormat format, const nlohmann::ordered_json& tools,
                                            const std::map<std::string, bool>& strict, bool default_on);

 private:
  std::mutex mutex_;
  std::list<std::pair<std::string, std::shared_ptr<const OutputGrammars>>> recent_;  // most recent first
};

// Where the turn's output is, as the constrainer needs it.
struct OutputPosition {
  std::string_view text;     // the turn's output text so far
  size_t answer_start = 0;   // where its answer begins (after reasoning)
  bool in_reasoning = false;
};

struct ConstraintStats {
  int64_t constrained_tokens = 0;  // sampled under a grammar
  int64_t refused_forced = 0;      // tokens keel wrote itself that a grammar refused (the grammar then let go)
  double mask_seconds = 0;         // spent computing masks
};

// Runs the grammars over one turn's tokens. Engine thread.
class OutputConstrainer {
 public:
  // `end_ids`: the tokens that end the output (end of sequence, the format's end-of-turn markers).
  // `start_ids`: tokens allowed where the answer has not begun besides the answer's grammar (the
  // reasoning opener, a call marker), so a constrained answer can still reason or call a tool.
  // Inactive when `grammars` is null (`vocabulary` may then be null too).
  OutputConstrainer(std::shared_ptr<const OutputGrammars> grammars, const constrain::Vocabulary* vocabulary,
                    toolcall::ToolCallFormat format, std::vector<int32_t> end_ids, std::vector<int32_t> start_ids);

  bool active() const { return grammars_ != nullptr; }
  // Before a sample: sets every logit the grammar in force refuses to -infinity.
  void mask(std::span<float> logits, const OutputPosition& at);
  // After a token is written (sampled or forced), with the position after it.
  void wrote(int32_t id, const OutputPosition& at);
  const ConstraintStats& stats() const { return stats_; }

 private:
  void open_call(const OutputPosition& at);

  std::shared_ptr<const OutputGrammars> grammars_;
  const constrain::Vocabulary* vocabulary_;
  toolcall::ToolCallFormat format_;
  std::vector<int32_t> end_ids_, start_ids_;
  std::optional<constrain::TokenConstraint> call_;    // a call being written
  std::optional<constrain::TokenConstraint> answer_;  // the structured answer
  bool answer_fed_ = false;   // the answer's grammar has taken a token
  bool answer_done_ = false;  // the answer has ended or given way to a tool call
  // Llama 3's bare call, Mistral's [TOOL_CALLS] array: where the call a grammar can only join once
  // its first bytes are written was last looked for (open_call).
  size_t late_call_tried_at_ = SIZE_MAX;
  constrain::TokenSet allowed_;
  ConstraintStats stats_;
};

class ServedModel;
// The constrainer for a turn of `model`: its end tokens (end of sequence, the format's end-of-turn
// markers) and start tokens (the reasoning opener when `reasoning`, the format's call marker when
// `calls_allowed`) read from the model's tokenizer and format. Inactive when `grammars` is null.
OutputConstrainer make_output_constrainer(const ServedModel& model, std::shared_ptr<const OutputGrammars> grammars,
                                          bool reasoning, bool calls_allowed);

}  // namespace keel
