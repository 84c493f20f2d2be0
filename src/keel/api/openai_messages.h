#pragma once
// OpenAI Chat Completions `messages` -> the messages a chat template renders. The shapes already
// are the template's; this checks them and normalizes what templates trip over:
// - roles system, developer (rendered as "system": most templates drop roles they do not know),
//   user, assistant, tool; anything else is a 400 naming the role.
// - content as a string or text parts (joined with "\n"); image/audio/file parts -> 400; an
//   assistant's null content -> "".
// - assistant tool_calls keep their id, function.name and function.arguments exactly as given (a
//   JSON string stays a string; the renderer parses it); "reasoning_content" (or "reasoning") is
//   kept as reasoning_content.
// - tool messages need tool_call_id; a "name" the client sent is kept.
//
// Threads: pure functions of their arguments; any HTTP thread, many at once.
#include "keel/api/request_json.h"

namespace keel::api {

void convert_openai_messages(const Json& messages, Json& out);

}  // namespace keel::api
