#pragma once
// One assistant turn of a chat request, from prepared prompt to parsed output: reuse the cached
// prefix, prefill the rest, decode, split the output into text, reasoning and tool calls, check
// every call against its tool's schema and regenerate an invalid one from where it began.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "keel/engine/sampler.h"
#include "keel/engine/served_model.h"
#include "keel/engine/session_cache.h"
#include "keel/engine/stop_matcher.h"
#include "keel/toolcall/tool_call_parser.h"

namespace keel {

// What the request allows or demands of tool calls (Anthropic tool_choice / OpenAI tool_choice).
enum class ToolUse { Auto, Required, Named, Disabled };

struct TurnOptions {
  int64_t max_tokens = 256;
  SamplingParams sampling;
  std::vector<std::string> stop_sequences;
  nlohmann::ordered_json tools;  // function form, or null
  ToolUse tool_use = ToolUse::Auto;
  std::string tool_name;  // ToolUse::Named
  bool parallel_tool_calls = true;
  int tool_retries = 2;
  bool reasoning = false;  // split the model's reasoning block out of the text
  int64_t prefill_chunk = 256;
  const std::atomic<bool>* cancelled = nullptr;  // set by the client side: stop at the next step
  // Called once the cached prefix is known, before prefill: how many prompt tokens it covers.
  std::function<void(int64_t reused_tokens)> on_reuse;
};

struct TurnEvent {
  enum class Kind { Text, Reasoning, ToolCall };
  Kind kind = Kind::Text;
  std::string text;
  std::string name;                   // ToolCall
  nlohmann::ordered_json arguments;  // ToolCall: checked and coerced against the schema
};

enum class TurnFinish { EndTurn, MaxTokens, StopSequence, ToolUse, Cancelled, ContextFull };

struct TurnStats {
  int64_t prompt_tokens = 0;
  int64_t reused_tokens = 0;     // served from the cache, not prefilled
  int64_t output_tokens = 0;     // every token sampled, retried ones included
  int64_t valid_calls = 0;
  int64_t invalid_calls = 0;     // still invalid after the retries: reported to the client as text
  int64_t retries = 0;
  double prefill_seconds = 0;
  double first_token_seconds = 0;  // from the start of the turn
  double decode_seconds = 0;
};

struct TurnResult {
  TurnFinish finish = TurnFinish::EndTurn;
  std::string stop_sequence;
  TurnStats stats;
};

// Runs on the engine thread. `emit` sees the output as it becomes final.
TurnResult run_turn(ServedModel& model, SessionCache& session, const PreparedPrompt& prompt,
                    const TurnOptions& options, const std::function<void(TurnEvent&&)>& emit);

}  // namespace keel
