#include "keel/engine/history_replay.h"

#include <string>
#include <vector>

namespace keel {
namespace {

using json = nlohmann::ordered_json;

constexpr const char* kRequestReasoningField = "reasoning_content";

bool is_role(const json& message, std::string_view role) {
  return message.is_object() && message.contains("role") && message["role"].is_string() &&
         message["role"].get_ref<const std::string&>() == role;
}

bool has_tool_calls(const json& message) {
  return message.contains("tool_calls") && message["tool_calls"].is_array() && !message["tool_calls"].empty();
}

std::string string_field(const json& message, const std::string& key) {
  if (!message.contains(key) || !message[key].is_string()) return {};
  return message[key].get<std::string>();
}

json renamed_reasoning(json message, const std::string& field) {
  if (!is_role(message, "assistant") || !message.contains(kRequestReasoningField)) return message;
  json value = std::move(message[kRequestReasoningField]);
  message.erase(kRequestReasoningField);
  message[field] = std::move(value);
  return message;
}

std::string call_id(const json& call) {
  return call.is_object() && call.contains("id") && call["id"].is_string() ? call["id"].get<std::string>() : "";
}

std::string answered_id(const json& tool_message) { return string_field(tool_message, "tool_call_id"); }

// Text beside a call is rendered as the analysis message; with reasoning also there the template
// raises, so the text joins the reasoning the model wrote before it.
void join_text_into_reasoning(json& message, const std::string& field) {
  const std::string text = string_field(message, "content");
  const std::string reasoning = string_field(message, field);
  if (text.empty() || reasoning.empty()) return;
  message[field] = reasoning + "\n\n" + text;
  message["content"] = "";
}

// messages[at] is an assistant message with tool calls: appends it to `out` one call per message,
// each followed by its answers among the tool messages right after it. Returns the index after
// those tool messages.
size_t split_calls(const json& messages, size_t at, const std::string& field, json& out) {
  const json& message = messages[at];
  size_t end = at + 1;
  while (end < messages.size() && is_role(messages[end], "tool")) ++end;
  std::vector<bool> placed(end - at - 1, false);
  const json& calls = message["tool_calls"];
  for (size_t c = 0; c < calls.size(); ++c) {
    json one = c == 0 ? message : json{{"role", "assistant"}, {"content", ""}};
    one["tool_calls"] = json::array({calls[c]});
    join_text_into_reasoning(one, field);
    out.push_back(std::move(one));
    const std::string id = call_id(calls[c]);
    for (size_t t = at + 1; t < end; ++t) {
      if (placed[t - at - 1] || id.empty() || answered_id(messages[t]) != id) continue;
      out.push_back(messages[t]);
      placed[t - at - 1] = true;
    }
  }
  for (size_t t = at + 1; t < end; ++t)
    if (!placed[t - at - 1]) out.push_back(messages[t]);
  return end;
}

}  // namespace

json replay_history(const json& messages, const toolcall::ReasoningControl& reasoning,
                    toolcall::ToolCallFormat template_format) {
  if (!messages.is_array()) return messages;
  const std::string field = reasoning.history_field.empty() ? kRequestReasoningField : reasoning.history_field;
  json renamed = json::array();
  for (const json& m : messages) renamed.push_back(field == kRequestReasoningField ? m : renamed_reasoning(m, field));
  if (template_format != toolcall::ToolCallFormat::Harmony) return renamed;

  json out = json::array();
  size_t i = 0;
  while (i < renamed.size()) {
    if (is_role(renamed[i], "assistant") && has_tool_calls(renamed[i])) {
      i = split_calls(renamed, i, field, out);
    } else {
      out.push_back(renamed[i++]);
    }
  }
  return out;
}

}  // namespace keel
