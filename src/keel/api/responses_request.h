#pragma once
// The OpenAI Responses request body (POST /v1/responses, what Codex CLI and the OpenAI SDK's
// client.responses speak) -> ChatRequest. Declared in chat_request.h: parse_responses_request.
//
// `instructions` becomes a leading system message. `input` is a string (one user message) or
// items, converted to the chat-template messages of openai_messages.h:
//   - messages {type?: "message", role: user|system|developer|assistant, content: string or parts
//     input_text / output_text / text / refusal}; developer renders as system; image, file and
//     audio parts -> 400;
//   - function_call {call_id, name, arguments} -> a tool call of the assistant message it follows
//     (consecutive assistant items are one turn, so they merge into one message);
//   - function_call_output {call_id, output: string or input_text parts} -> a tool message, named
//     after the call it answers;
//   - reasoning {summary, content} -> reasoning_content of the assistant message it belongs to
//     (the template decides whether to render it; encrypted_content is never readable here);
//   - any other item type -> 400 naming it.
// tools: function tools {type: "function", name, description?, parameters?, strict?}; any other
// type (web_search, file_search, custom, local_shell, ...) -> 400 naming it. tool_choice: "auto",
// "none", "required" or {type: "function", name}. parallel_tool_calls, max_output_tokens (default
// kDefaultOpenAIMaxTokens), temperature, top_p, top_k (extension), seed (extension), stream,
// reasoning.effort (as Chat Completions' reasoning_effort), prompt_cache_key (else user) as the
// affinity key, text.format (structured output, as Chat Completions' response_format), a tool's
// strict flag. Accepted with no effect: store (keel keeps no responses), include, metadata,
// service_tier, truncation "disabled"/"auto", text.verbosity, stream_options, safety_identifier.
// Refused: previous_response_id and conversation (keel keeps no responses: send the whole
// conversation as input), background, prompt, top_logprobs and include "message.output_text.logprobs".
//
// Threads: pure functions of the body and limits; any HTTP thread, many at once.
#include "keel/api/chat_request.h"
