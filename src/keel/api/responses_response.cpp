#include "keel/api/responses_response.h"

#include "keel/api/json_text.h"

namespace keel::api {

using Json = nlohmann::ordered_json;

Json responses_settings(const ChatRequest& r) {
  Json tools = Json::array();
  if (r.tools.is_array())
    for (const auto& t : r.tools) {
      Json tool = {{"type", "function"}};
      for (const auto& [key, value] : t["function"].items()) tool[key] = value;
      tools.push_back(std::move(tool));
    }
  Json tool_choice;
  switch (r.tool_choice) {
    case ToolChoiceMode::Auto: tool_choice = "auto"; break;
    case ToolChoiceMode::Any: tool_choice = "required"; break;
    case ToolChoiceMode::None: tool_choice = "none"; break;
    case ToolChoiceMode::Tool: tool_choice = {{"type", "function"}, {"name", r.tool_choice_name}}; break;
  }
  return {{"max_output_tokens", r.max_tokens},
          {"parallel_tool_calls", r.parallel_tool_calls},
          {"previous_response_id", nullptr},
          {"reasoning", {{"effort", r.reasoning_effort ? Json(*r.reasoning_effort) : Json(nullptr)}, {"summary", nullptr}}},
          {"store", false},
          {"temperature", r.temperature},
          {"text", {{"format", {{"type", "text"}}}}},
          {"tool_choice", std::move(tool_choice)},
          {"tools", std::move(tools)},
          {"top_p", r.top_p},
          {"truncation", "disabled"},
          {"metadata", Json::object()}};
}

Json responses_message_item(const std::string& id, const std::string& text, const char* status) {
  return {{"id", id},
          {"type", "message"},
          {"status", status},
          {"role", "assistant"},
          {"content", Json::array({{{"type", "output_text"}, {"text", text}, {"annotations", Json::array()},
                                    {"logprobs", Json::array()}}})}};
}

Json responses_reasoning_item(const std::string& id, const std::string& text) {
  return {{"id", id},
          {"type", "reasoning"},
          {"summary", Json::array()},
          {"content", Json::array({{{"type", "reasoning_text"}, {"text", text}}})}};
}

Json responses_function_call_item(const std::string& id, const std::string& call_id, const std::string& name,
                                  const std::string& arguments, const char* status) {
  return {{"id", id}, {"type", "function_call"}, {"status", status}, {"call_id", call_id}, {"name", name},
          {"arguments", arguments}};
}

std::string responses_arguments(const Json& input) { return to_json_text(input.is_object() ? input : Json::object()); }

Json responses_usage_json(const Usage& usage) {
  const int64_t input = usage.prompt_tokens();
  return {{"input_tokens", input},
          {"input_tokens_details", {{"cached_tokens", usage.cache_read_input_tokens}}},
          {"output_tokens", usage.output_tokens},
          {"output_tokens_details", {{"reasoning_tokens", usage.reasoning_tokens}}},
          {"total_tokens", input + usage.output_tokens}};
}

Json responses_object(const std::string& id, int64_t created_unix, const std::string& model, const Json& settings,
                      const char* status, Json output, const Json& usage, const Json& incomplete_details) {
  Json o = {{"id", id},
            {"object", "response"},
            {"created_at", created_unix},
            {"status", status},
            {"error", nullptr},
            {"incomplete_details", incomplete_details},
            {"instructions", nullptr},
            {"model", model},
            {"output", std::move(output)}};
  for (const auto& [key, value] : settings.items()) o[key] = value;
  o["usage"] = usage;
  return o;
}

const char* responses_status(FinishReason reason) {
  return reason == FinishReason::MaxTokens ? "incomplete" : "completed";
}

Json responses_incomplete_details(FinishReason reason) {
  if (reason == FinishReason::MaxTokens) return {{"reason", "max_output_tokens"}};
  return nullptr;
}

std::string responses_response_body(const ChatResult& result, const Json& settings, int64_t created_unix) {
  Json output = Json::array();
  for (const auto& block : result.blocks) {
    switch (block.kind) {
      case OutputBlock::Kind::Text:
        output.push_back(responses_message_item(new_item_id("msg_"), block.text, "completed"));
        break;
      case OutputBlock::Kind::Thinking:
        output.push_back(responses_reasoning_item(new_item_id("rs_"), block.text));
        break;
      case OutputBlock::Kind::ToolUse:
        output.push_back(responses_function_call_item(new_item_id("fc_"), block.id, block.name,
                                                      responses_arguments(block.input), "completed"));
        break;
    }
  }
  return to_json_text(responses_object(result.id, created_unix, result.model, settings, responses_status(result.finish),
                                       std::move(output), responses_usage_json(result.usage),
                                       responses_incomplete_details(result.finish)));
}

}  // namespace keel::api
