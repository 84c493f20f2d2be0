#pragma once
// Earlier assistant turns handed to the chat template the way that template reads them. Requests
// carry an assistant's earlier reasoning as "reasoning_content" (api/chat_request.h); most
// templates read that, some read "thinking" instead (gpt-oss, LFM2.5), and gpt-oss's template
// renders one tool call per assistant message and refuses a message with tool calls that has both
// text and thinking. This reshapes the messages so every earlier turn renders, and renders what
// the model wrote, before the template sees them. Pure function, any thread.
#include <nlohmann/json.hpp>

#include "keel/toolcall/format_detect.h"

namespace keel {

// `messages`: OpenAI-form (api/chat_request.h). `reasoning`: what the template reads
// (toolcall::detect_reasoning_control). `template_format`: the call format detected from the
// template itself, not a --tool-call-format override: these are facts about the template.
//
// - reasoning_content becomes the field the template reads (reasoning.history_field), when that is
//   another one.
// - Harmony templates: an assistant message with several tool calls becomes one assistant message
//   per call, each followed by the tool messages answering it (matched by tool_call_id; answers
//   matching no call keep their place after the last call), since the template renders only
//   tool_calls[0] and names every tool answer after the latest call. Text and reasoning stay with
//   the first call. Beside tool calls, the template renders text as the analysis message and
//   raises when there is also reasoning, so text after reasoning joins it: "REASONING\n\nTEXT".
nlohmann::ordered_json replay_history(const nlohmann::ordered_json& messages, const toolcall::ReasoningControl& reasoning,
                                      toolcall::ToolCallFormat template_format);

}  // namespace keel
