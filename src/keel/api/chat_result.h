#pragma once
// A finished generation, whichever API asked for it, and the JSON bodies each API answers with.
//
// Threads: plain values and pure functions; the id generators draw from a per-thread random
// stream, so any thread may call them.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "keel/api/api_error.h"
#include "keel/engine/token_logprobs.h"

namespace keel::api {

// Anthropic stop_reason end_turn|max_tokens|stop_sequence|tool_use;
// OpenAI finish_reason stop|length|stop|tool_calls.
enum class FinishReason { EndTurn, MaxTokens, StopSequence, ToolUse };

// Anthropic semantics: input_tokens counts the prompt tokens that were neither read from nor
// written to the prefix cache, so the whole prompt is input + cache_read + cache_creation. OpenAI's
// prompt_tokens is that whole sum and prompt_tokens_details.cached_tokens is cache_read.
struct Usage {
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  int64_t cache_read_input_tokens = 0;
  int64_t cache_creation_input_tokens = 0;
  int64_t reasoning_tokens = 0;  // of output_tokens, those inside a reasoning block (Responses reports them)
  int64_t prompt_tokens() const { return input_tokens + cache_read_input_tokens + cache_creation_input_tokens; }
};

struct OutputBlock {
  enum class Kind { Text, Thinking, ToolUse } kind = Kind::Text;
  std::string text;             // Text and Thinking
  std::string id, name;         // ToolUse
  nlohmann::ordered_json input; // ToolUse: an object, key order as the model wrote it
};

struct ChatResult {
  std::string id;
  std::string model;
  std::vector<OutputBlock> blocks;
  FinishReason finish = FinishReason::EndTurn;
  std::string stop_sequence;  // the sequence that matched, for FinishReason::StopSequence
  Usage usage;
  // OpenAI choices[].logprobs: null, or {"content": [openai_logprob_entries...], "refusal": null}.
  nlohmann::ordered_json logprobs;
};

// {"id","type":"message","role":"assistant","model","content":[...],"stop_reason","stop_sequence",
//  "usage"}. Thinking blocks carry "signature":"" (keel has nothing to sign).
std::string anthropic_response_body(const ChatResult& result);
// {"id","object":"chat.completion","created","model","choices":[{"index","message":{"role",
//  "content","reasoning_content"?,"tool_calls"?},"logprobs","finish_reason"}],"usage"}, one
// choice per result (n), the id and model of the first. Text blocks are concatenated; content is
// null when there is no text but there are tool calls; tool_calls arguments are the input
// serialized as a JSON string. Usage counts the prompt once (the first choice's split) and the
// output tokens of every choice.
std::string openai_response_body(std::span<const ChatResult> choices, int64_t created_unix);
// OpenAI's logprobs entries, one per token: {"token","logprob","bytes":[...],"top_logprobs":
// [{"token","logprob","bytes"}]}; "token" is the bytes as text (a piece of a UTF-8 character
// becomes U+FFFD there; "bytes" has them exactly).
nlohmann::ordered_json openai_logprob_entries(std::span<const TokenLogprob> tokens);

const char* anthropic_stop_reason(FinishReason reason);
const char* openai_finish_reason(FinishReason reason);
// The usage objects of each API, shared by the bodies and the streams.
nlohmann::ordered_json anthropic_usage_json(const Usage& usage);
nlohmann::ordered_json openai_usage_json(const Usage& usage);

// Fresh random ids (24 base-62 chars after the prefix): "msg_..." / "chatcmpl-..." / "resp_..."
// and "toolu_..." / "call_..." (Chat Completions and Responses); new_item_id for the Responses
// output items ("msg_", "fc_", "rs_").
std::string new_message_id(Protocol protocol);
std::string new_tool_call_id(Protocol protocol);
std::string new_item_id(std::string_view prefix);

}  // namespace keel::api
