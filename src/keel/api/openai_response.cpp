#include "keel/api/chat_result.h"
#include "keel/api/json_text.h"

namespace keel::api {

const char* openai_finish_reason(FinishReason reason) {
  switch (reason) {
    case FinishReason::EndTurn: return "stop";
    case FinishReason::MaxTokens: return "length";
    case FinishReason::StopSequence: return "stop";
    case FinishReason::ToolUse: return "tool_calls";
  }
  return "stop";
}

nlohmann::ordered_json openai_usage_json(const Usage& usage) {
  int64_t prompt = usage.prompt_tokens();
  return {{"prompt_tokens", prompt},
          {"completion_tokens", usage.output_tokens},
          {"total_tokens", prompt + usage.output_tokens},
          {"prompt_tokens_details", {{"cached_tokens", usage.cache_read_input_tokens}}}};
}

std::string openai_response_body(const ChatResult& result, int64_t created_unix) {
  std::string text;
  std::string reasoning;
  bool has_text = false;
  bool has_reasoning = false;
  nlohmann::ordered_json tool_calls = nlohmann::ordered_json::array();
  for (const auto& block : result.blocks) {
    switch (block.kind) {
      case OutputBlock::Kind::Text:
        text += block.text;
        has_text = true;
        break;
      case OutputBlock::Kind::Thinking:
        reasoning += block.text;
        has_reasoning = true;
        break;
      case OutputBlock::Kind::ToolUse: {
        const auto& input = block.input.is_object() ? block.input : nlohmann::ordered_json::object();
        tool_calls.push_back({{"id", block.id},
                              {"type", "function"},
                              {"function", {{"name", block.name}, {"arguments", to_json_text(input)}}}});
        break;
      }
    }
  }
  nlohmann::ordered_json message = {{"role", "assistant"}};
  if (has_text || tool_calls.empty())
    message["content"] = text;
  else
    message["content"] = nullptr;
  if (has_reasoning) message["reasoning_content"] = reasoning;
  if (!tool_calls.empty()) message["tool_calls"] = std::move(tool_calls);

  nlohmann::ordered_json choice = {{"index", 0},
                                   {"message", std::move(message)},
                                   {"logprobs", nullptr},
                                   {"finish_reason", openai_finish_reason(result.finish)}};
  nlohmann::ordered_json body = {{"id", result.id},
                                 {"object", "chat.completion"},
                                 {"created", created_unix},
                                 {"model", result.model},
                                 {"choices", nlohmann::ordered_json::array({std::move(choice)})},
                                 {"usage", openai_usage_json(result.usage)}};
  return to_json_text(body);
}

}  // namespace keel::api
