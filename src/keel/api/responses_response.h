#pragma once
// The OpenAI Responses answer: the response object, whole (a non-streaming body) or as the
// snapshots the stream's response.created / response.completed events carry, and its output items:
//   message   {id: "msg_...", type, status, role: "assistant", content: [{type: "output_text", text,
//              annotations: [], logprobs: []}]}
//   reasoning {id: "rs_...", type, summary: [], content: [{type: "reasoning_text", text}]}
//   function_call {id: "fc_...", type, status, call_id: "call_...", name, arguments: JSON text}
// status is "completed", or "incomplete" with incomplete_details.reason "max_output_tokens" when
// the turn ran out of tokens. usage: input_tokens (the whole prompt), input_tokens_details.
// cached_tokens, output_tokens, output_tokens_details.reasoning_tokens, total_tokens.
//
// Threads: pure functions; any thread.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "keel/api/chat_request.h"
#include "keel/api/chat_result.h"

namespace keel::api {

// The request's settings as the response object echoes them (model, tools in Responses form,
// tool_choice, parallel_tool_calls, temperature, top_p, max_output_tokens, reasoning, and the
// fixed store: false, truncation: "disabled", text.format "text").
nlohmann::ordered_json responses_settings(const ChatRequest& request);

nlohmann::ordered_json responses_message_item(const std::string& id, const std::string& text, const char* status);
nlohmann::ordered_json responses_reasoning_item(const std::string& id, const std::string& text);
nlohmann::ordered_json responses_function_call_item(const std::string& id, const std::string& call_id,
                                                    const std::string& name, const std::string& arguments,
                                                    const char* status);
// The arguments of a call as a JSON string (an empty object when the input is not one).
std::string responses_arguments(const nlohmann::ordered_json& input);
nlohmann::ordered_json responses_usage_json(const Usage& usage);

// status: "in_progress", "completed", "incomplete" or "failed"; usage null until known.
nlohmann::ordered_json responses_object(const std::string& id, int64_t created_unix, const std::string& model,
                                        const nlohmann::ordered_json& settings, const char* status,
                                        nlohmann::ordered_json output, const nlohmann::ordered_json& usage,
                                        const nlohmann::ordered_json& incomplete_details = nullptr);

// The status (and incomplete_details) a finished turn gets.
const char* responses_status(FinishReason reason);
nlohmann::ordered_json responses_incomplete_details(FinishReason reason);

std::string responses_response_body(const ChatResult& result, const nlohmann::ordered_json& settings,
                                    int64_t created_unix);

}  // namespace keel::api
