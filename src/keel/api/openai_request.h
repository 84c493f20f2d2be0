#pragma once
// The OpenAI Chat Completions request body (POST /v1/chat/completions) -> ChatRequest.
// Declared in chat_request.h: parse_openai_request. Field rules:
//   model (string), messages (non-empty; see openai_messages.h), tools
//   [{"type":"function","function":{name, description?, parameters?}}] passed to the template as
//   sent, tool_choice "auto"|"none"|"required"|{"type":"function","function":{"name"}},
//   parallel_tool_calls, max_completion_tokens or max_tokens (default kDefaultOpenAIMaxTokens),
//   temperature [0,2], top_p [0,1] (0: greedy), top_k (extension; -1 or 0 = off), seed, stop
//   (string or array), stream, stream_options.include_usage, reasoning_effort (anything but "none"
//   turns thinking on), n [1, kMaxChoices], presence_penalty and frequency_penalty [-2,2],
//   repetition_penalty (vLLM's extension, (0,10]), logit_bias ({"id": [-100,100]}), logprobs and
//   top_logprobs [0,20] (only with logprobs: true), response_format (text, json_object,
//   json_schema: the answer's grammar, request_common.h read_json_format), function.strict per
//   tool. Unknown top-level fields are ignored.
//
// Threads: pure functions of the body and limits; any HTTP thread, many at once.
#include "keel/api/chat_request.h"
