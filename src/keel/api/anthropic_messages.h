#pragma once
// Anthropic `system` + `messages` -> the OpenAI-format messages a chat template renders.
//
// - system (string or text blocks) -> a leading {"role":"system"} message; blocks whose text starts
//   with "x-anthropic-billing-header:" are dropped (Claude Code sends one that changes on every
//   request, which would defeat prefix reuse). Nothing left -> no system message.
// - user text blocks -> one "content" string (a single block stays as is, several are joined with
//   "\n"); each tool_result -> its own {"role":"tool","tool_call_id","name"?,"content"} message,
//   all placed before the user's remaining text. tool_result content (string or text blocks) is
//   joined the same way; is_error:true prefixes it with "Error: " (a prefix, not a field: every
//   template shows it to the model, none would show an extra field).
// - assistant text -> "content", thinking -> "reasoning_content", tool_use -> "tool_calls"
//   [{"id","type":"function","function":{"name","arguments": <input object, key order kept>}}];
//   redacted_thinking is dropped (its content is encrypted).
// - a system message inside `messages` (Claude Code's mid-conversation system messages, string or
//   text blocks) -> {"role":"system"} at the same place; rendered in place or folded into a user
//   turn by chat::render_conversation (chat/system_fold.h). Without text it is dropped.
// - image and document blocks -> 400 "image content is not supported yet".
//
// Threads: pure functions of their arguments; any HTTP thread, many at once.
#include "keel/api/request_json.h"

namespace keel::api {

// Appends the system message (if any) to `out`.
void convert_anthropic_system(const Json& system, Json& out);
// Appends the template messages for `messages` (already checked to be a non-empty array).
void convert_anthropic_messages(const Json& messages, Json& out);

inline constexpr std::string_view kBillingHeaderPrefix = "x-anthropic-billing-header:";

}  // namespace keel::api
