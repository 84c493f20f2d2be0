#pragma once
// One internal request, whichever API it arrived through. The protocol layers (anthropic_request,
// openai_request) turn a request body into this; the server renders `messages` + `tools` through the
// model's own chat template and hands the sampling fields to the engine.
//
// Threads: plain values; a ChatRequest belongs to the HTTP thread that parsed it (the engine gets
// copies of what it needs in TurnOptions).
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "keel/api/api_error.h"

namespace keel::constrain {
struct Grammar;
}

namespace keel::api {

// Requests beyond these are answered 400 before any work is done. max_tokens above the cap is
// clamped to it (a cap, not a rejection: Claude Code asks for 32000-64000 tokens as a matter of
// course) unless reject_max_tokens_over_cap is set.
struct RequestLimits {
  size_t max_messages = 2048;
  size_t max_tools = 256;
  int64_t max_tokens_cap = 32768;
  int max_json_depth = 64;
  bool reject_max_tokens_over_cap = false;
};

// OpenAI: "auto" / "required" / {"type":"function","function":{"name":...}} / "none".
enum class ToolChoiceMode { Auto, Any, Tool, None };

// The most choices one OpenAI request may ask for (n): each is a turn of its own in the scheduler.
inline constexpr int kMaxChoices = 16;

// OpenAI requests without max_completion_tokens or max_tokens get this many (then the cap applies).
inline constexpr int64_t kDefaultOpenAIMaxTokens = 4096;

struct ChatRequest {
  Protocol protocol = Protocol::Anthropic;
  std::string model;
  // OpenAI-format messages, exactly what the chat template gets: {"role":"system"|"user"|
  // "assistant"|"tool", "content": string, ...}; assistants may carry "reasoning_content" and
  // "tool_calls" [{"id","type":"function","function":{"name","arguments"}}]; tool messages carry
  // "tool_call_id" (and "name" when the call it answers names a tool). Every client object (tool
  // schemas, tool-call arguments) keeps the key order it was sent with.
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  // [{"type":"function","function":{"name","description","parameters"}}], or null when none.
  nlohmann::ordered_json tools = nullptr;
  ToolChoiceMode tool_choice = ToolChoiceMode::Auto;
  std::string tool_choice_name;  // set for ToolChoiceMode::Tool
  bool parallel_tool_calls = true;
  // Tools the client marked strict (true) or not (false); those it did not mark are absent and
  // follow the server's --constrained-tool-calls default.
  std::map<std::string, bool> tool_strict;
  // Structured output (response_format, text.format, output_config.format): the answer's grammar,
  // compiled from the client's schema. Null: free text.
  std::shared_ptr<const constrain::Grammar> answer_grammar;
  // Anthropic: required. OpenAI: max_completion_tokens, else max_tokens, else
  // kDefaultOpenAIMaxTokens. Always in [1, RequestLimits::max_tokens_cap].
  int64_t max_tokens = kDefaultOpenAIMaxTokens;
  float temperature = 1.0f;
  float top_p = 1.0f;
  int top_k = 0;  // 0: no top-k cut
  std::optional<uint64_t> seed;
  // OpenAI Chat Completions: penalties in [-2, 2] and logit_bias (token id -> bias in [-100, 100]),
  // as OpenAI defines them (chat_turn.h, TurnOptions). Ids are checked against the model later.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::vector<std::pair<int32_t, float>> logit_bias;
  // vLLM's extension of Chat Completions (chat_turn.h, TurnOptions): in (0, 10], 1 is off.
  float repetition_penalty = 1.0f;
  // OpenAI logprobs: true with top_logprobs alternatives (0-20) per token. nullopt: none.
  std::optional<int> top_logprobs;
  // OpenAI n: this many choices from one prompt, choice i sampled with seed + i (kMaxChoices at most).
  int n = 1;
  std::vector<std::string> stop_sequences;  // Anthropic stop_sequences / OpenAI stop (string or array)
  bool stream = false;
  bool include_usage = false;  // OpenAI stream_options.include_usage
  // Anthropic thinking.type "enabled", "adaptive" or "between_tools" / OpenAI reasoning_effort
  // other than "none": the template's enable_thinking.
  bool thinking = false;
  // The most reasoning tokens before keel closes the reasoning block (Anthropic
  // thinking.budget_tokens, or the budget an effort level maps to: reasoning_budget_for_effort).
  // nullopt: the model decides.
  std::optional<int64_t> reasoning_budget;
  // The reasoning level the client asked for, as "low", "medium" or "high" (effort_level_*):
  // passed to templates that read `reasoning_effort` (gpt-oss's "Reasoning:" line). nullopt when
  // the request says nothing about effort, so the template keeps its own default.
  std::optional<std::string> reasoning_effort;
  // The last message is the assistant's: the client prefills the start of the answer (Anthropic
  // allows this). The renderer should continue that message instead of opening a new turn.
  bool assistant_prefill = false;
  // Who the conversation belongs to, for the scheduler's affinity (which live KV sequence the
  // next turn continues): Anthropic metadata.user_id; OpenAI prompt_cache_key, else user. Empty
  // when the request does not say. The x-claude-code-agent-id header, when sent, wins.
  std::string user;
};

// Reasoning budgets for effort levels (OpenAI reasoning_effort, Anthropic output_config.effort):
// minimal 512, low 2048, medium 8192, high 24576 tokens; "max"/"xhigh" and unknown levels: no limit.
std::optional<int64_t> reasoning_budget_for_effort(std::string_view effort);

// Effort words and budgets as one of the three levels gpt-oss was trained with ("low", "medium",
// "high"; reasoning_effort.cpp). Words: "none"/"minimal"/"low" -> low, "medium" -> medium,
// "high"/"xhigh"/"max" -> high, anything else nullopt. Budgets (Anthropic thinking.budget_tokens)
// by the nearest of reasoning_budget_for_effort's: under 4096 -> low, under 16384 -> medium,
// else high.
std::optional<std::string> effort_level_for_effort(std::string_view effort);
std::string effort_level_for_budget(int64_t budget_tokens);
// What thinking turned off means for a template with effort levels: gpt-oss cannot stop reasoning,
// so the least of it.
inline constexpr std::string_view kEffortLevelWhenThinkingOff = "low";

// All three throw ApiError (400 invalid_request_error naming the field, e.g.
// "messages.3.content.0.type: unknown content block type \"foo\"") for anything malformed.
ChatRequest parse_anthropic_request(std::string_view body, const RequestLimits& limits);
ChatRequest parse_openai_request(std::string_view body, const RequestLimits& limits);
ChatRequest parse_responses_request(std::string_view body, const RequestLimits& limits);  // responses_request.h
// POST /v1/messages/count_tokens: the same body without max_tokens (optional there; when absent
// the result's max_tokens is 1). Same conversion, so the count equals the request's input_tokens.
ChatRequest parse_anthropic_count_tokens_request(std::string_view body, const RequestLimits& limits);

}  // namespace keel::api
