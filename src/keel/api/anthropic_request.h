#pragma once
// The Anthropic Messages request body (POST /v1/messages, /v1/messages/count_tokens) -> ChatRequest.
// Declared in chat_request.h: parse_anthropic_request, parse_anthropic_count_tokens_request.
// Field rules:
//   model (string), max_tokens (integer >= 1, required), messages (non-empty; see
//   anthropic_messages.h), system, tools [{name, description?, input_schema}] (type absent or
//   "custom"; server tools are refused), tool_choice {type auto|any|tool|none, name,
//   disable_parallel_tool_use}, temperature [0,1], top_p [0,1] (0: greedy), top_k >= 0, stop_sequences,
//   stream, thinking {type enabled|adaptive|disabled}. Unknown top-level fields are ignored.
//
// Threads: pure functions of the body and limits; any HTTP thread, many at once.
#include "keel/api/chat_request.h"
