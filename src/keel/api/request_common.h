#pragma once
// Field rules both protocols share: limits, sampling ranges, text joining.
//
// Threads: pure functions of their arguments; any HTTP thread, many at once.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "keel/api/chat_request.h"
#include "keel/api/request_json.h"

namespace keel::api {

// Text blocks/parts of one message become one string joined with this separator: templates such as
// Qwen2.5's concatenate `message.content` and cannot take a list.
inline constexpr std::string_view kTextBlockSeparator = "\n";
std::string join_texts(const std::vector<std::string>& texts);

// >= 1, clamped to limits.max_tokens_cap (or rejected with limits.reject_max_tokens_over_cap).
int64_t checked_max_tokens(int64_t requested, const std::string& field, const RequestLimits& limits);

// The number at `key` if present, which must lie in [lo, hi].
std::optional<double> number_in_range(const Json& object, std::string_view key, double lo, double hi);

void check_message_count(const Json& messages, const RequestLimits& limits);
void check_tool_count(const Json& tools, const RequestLimits& limits);

// OpenAI's sampling fields, shared by Chat Completions and Responses: temperature [0, 2], top_p
// [0, 1], top_k (keel's extension: -1 or 0 off) and seed.
void read_openai_sampling(const Json& root, ChatRequest& request);
// An OpenAI reasoning effort ("none", "minimal", "low", ...): the template's level, and thinking
// with its budget unless it is "none".
void apply_reasoning_effort(const std::string& effort, ChatRequest& request);

// Structured output. A JSON format object: {"type": "text"} (free text), {"type": "json_object"}
// (any JSON object) or {"type": "json_schema", ...} with the schema at `schema_at` inside it
// ("json_schema.schema" for Chat Completions, "schema" for Responses and Anthropic). Sets
// request.answer_grammar; a schema keel cannot honour exactly is a 400 naming the keyword.
// `path` names the object in errors ("response_format", "text.format", "output_config.format").
void read_json_format(const Json& format, const std::string& path, std::string_view schema_at, ChatRequest& request);

// A tool's own `strict` flag (OpenAI function.strict, Responses and Anthropic tool.strict), kept
// by tool name for constrained decoding. Checks that it is a boolean.
void read_tool_strict(const Json& tool, const std::string& path, const std::string& name, ChatRequest& request);

// Rejects a tool_choice naming a tool that is not in `tools` (template format) and tool_choice
// modes that need tools when there are none.
void check_tool_choice_against_tools(const ChatRequest& request, const std::string& field);

}  // namespace keel::api
