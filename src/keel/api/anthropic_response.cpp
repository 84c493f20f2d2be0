#include "keel/api/json_text.h"
#include "keel/api/chat_result.h"

namespace keel::api {

const char* anthropic_stop_reason(FinishReason reason) {
  switch (reason) {
    case FinishReason::EndTurn: return "end_turn";
    case FinishReason::MaxTokens: return "max_tokens";
    case FinishReason::StopSequence: return "stop_sequence";
    case FinishReason::ToolUse: return "tool_use";
  }
  return "end_turn";
}

nlohmann::ordered_json anthropic_usage_json(const Usage& usage) {
  return {{"input_tokens", usage.input_tokens},
          {"cache_creation_input_tokens", usage.cache_creation_input_tokens},
          {"cache_read_input_tokens", usage.cache_read_input_tokens},
          {"output_tokens", usage.output_tokens}};
}

std::string anthropic_response_body(const ChatResult& result) {
  nlohmann::ordered_json content = nlohmann::ordered_json::array();
  for (const auto& block : result.blocks) {
    switch (block.kind) {
      case OutputBlock::Kind::Text:
        content.push_back({{"type", "text"}, {"text", block.text}});
        break;
      case OutputBlock::Kind::Thinking:
        content.push_back({{"type", "thinking"}, {"thinking", block.text}, {"signature", ""}});
        break;
      case OutputBlock::Kind::ToolUse:
        content.push_back({{"type", "tool_use"},
                           {"id", block.id},
                           {"name", block.name},
                           {"input", block.input.is_object() ? block.input : nlohmann::ordered_json::object()}});
        break;
    }
  }
  nlohmann::ordered_json body = {{"id", result.id},
                                 {"type", "message"},
                                 {"role", "assistant"},
                                 {"model", result.model},
                                 {"content", std::move(content)},
                                 {"stop_reason", anthropic_stop_reason(result.finish)},
                                 {"stop_sequence", nullptr},
                                 {"usage", anthropic_usage_json(result.usage)}};
  if (result.finish == FinishReason::StopSequence) body["stop_sequence"] = result.stop_sequence;
  return to_json_text(body);
}

}  // namespace keel::api
