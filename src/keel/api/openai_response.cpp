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

namespace {

nlohmann::ordered_json choice_entry(const TokenChoice& c) {
  nlohmann::ordered_json bytes = nlohmann::ordered_json::array();
  for (char b : c.bytes) bytes.push_back(static_cast<unsigned char>(b));
  return {{"token", c.bytes}, {"logprob", c.logprob}, {"bytes", std::move(bytes)}};
}

nlohmann::ordered_json openai_choice(const ChatResult& result, size_t index) {
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

  return {{"index", index},
          {"message", std::move(message)},
          {"logprobs", result.logprobs},
          {"finish_reason", openai_finish_reason(result.finish)}};
}

}  // namespace

nlohmann::ordered_json openai_logprob_entries(std::span<const TokenLogprob> tokens) {
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  for (const TokenLogprob& t : tokens) {
    nlohmann::ordered_json entry = choice_entry(t.token);
    nlohmann::ordered_json top = nlohmann::ordered_json::array();
    for (const TokenChoice& c : t.top) top.push_back(choice_entry(c));
    entry["top_logprobs"] = std::move(top);
    entries.push_back(std::move(entry));
  }
  return entries;
}

std::string openai_response_body(std::span<const ChatResult> choices, int64_t created_unix) {
  nlohmann::ordered_json listed = nlohmann::ordered_json::array();
  Usage usage = choices.front().usage;
  usage.output_tokens = usage.reasoning_tokens = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    listed.push_back(openai_choice(choices[i], i));
    usage.output_tokens += choices[i].usage.output_tokens;
    usage.reasoning_tokens += choices[i].usage.reasoning_tokens;
  }
  nlohmann::ordered_json body = {{"id", choices.front().id},
                                 {"object", "chat.completion"},
                                 {"created", created_unix},
                                 {"model", choices.front().model},
                                 {"choices", std::move(listed)},
                                 {"usage", openai_usage_json(usage)}};
  return to_json_text(body);
}

}  // namespace keel::api
