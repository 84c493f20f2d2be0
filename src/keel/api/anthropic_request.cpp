#include "keel/api/anthropic_request.h"

#include <climits>
#include <set>

#include "keel/api/anthropic_messages.h"
#include "keel/api/request_common.h"

namespace keel::api {

namespace {

Json convert_tools(const Json& tools, const RequestLimits& limits, ChatRequest& request) {
  if (!tools.is_array()) reject_field("tools", "expected an array, got " + json_type_name(tools));
  check_tool_count(tools, limits);
  if (tools.empty()) return nullptr;
  Json out = Json::array();
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& tool = tools[i];
    std::string path = join_path("tools", i);
    expect_object(tool, path);
    if (auto type = optional_string(tool, "type", path); type && *type != "custom")
      reject_field(join_path(path, "type"), "tool type \"" + *type + "\" is not supported (only client tools with input_schema)");
    std::string name = require_string(tool, "name", path);
    if (name.empty()) reject_field(join_path(path, "name"), "must not be empty");
    if (!names.insert(name).second) reject_field(join_path(path, "name"), "duplicate tool name \"" + name + "\"");
    auto description = optional_string(tool, "description", path);
    const Json& schema = require_object(tool, "input_schema", path);
    Json function = {{"name", name}};
    if (description) function["description"] = *description;
    function["parameters"] = schema;
    read_tool_strict(tool, path, name, request);
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return out;
}

void read_tool_choice(const Json& choice, ChatRequest& request) {
  expect_object(choice, "tool_choice");
  std::string type = require_string(choice, "type", "tool_choice");
  if (type == "auto") {
    request.tool_choice = ToolChoiceMode::Auto;
  } else if (type == "any") {
    request.tool_choice = ToolChoiceMode::Any;
  } else if (type == "none") {
    request.tool_choice = ToolChoiceMode::None;
  } else if (type == "tool") {
    request.tool_choice = ToolChoiceMode::Tool;
    request.tool_choice_name = require_string(choice, "name", "tool_choice");
  } else {
    reject_field("tool_choice.type", "unknown tool_choice type \"" + type + "\" (expected auto, any, tool or none)");
  }
  if (optional_bool(choice, "disable_parallel_tool_use", "tool_choice").value_or(false))
    request.parallel_tool_calls = false;
  check_tool_choice_against_tools(request, "tool_choice");
}

std::vector<std::string> read_stop_sequences(const Json& stops) {
  if (!stops.is_array()) reject_field("stop_sequences", "expected an array of strings, got " + json_type_name(stops));
  std::vector<std::string> out;
  for (size_t i = 0; i < stops.size(); ++i) {
    std::string s = expect_string(stops[i], join_path("stop_sequences", i));
    if (s.empty()) reject_field(join_path("stop_sequences", i), "must not be empty");
    out.push_back(std::move(s));
  }
  return out;
}

// thinking: {"type": "enabled", "budget_tokens": N} | {"type": "adaptive"} (the effort, if any, is in
// output_config.effort) | {"type": "between_tools"} | {"type": "disabled"}. "display" and other
// presentation fields change nothing here.
// The effort level (for templates with one, chat_request.h) follows the budget; disabled is the
// least a model that cannot stop reasoning can do. output_config.effort overrides both (read_effort).
void read_thinking(const Json& thinking, const Json& root, ChatRequest& request) {
  expect_object(thinking, "thinking");
  std::string type = require_string(thinking, "type", "thinking");
  if (type == "disabled") {
    request.reasoning_effort = std::string(kEffortLevelWhenThinkingOff);
    return;
  }
  if (type == "enabled" || type == "adaptive" || type == "between_tools") {
    request.thinking = true;
    if (auto budget = optional_int(thinking, "budget_tokens", "thinking")) {
      if (*budget < 0) reject_field("thinking.budget_tokens", "must not be negative");
      request.reasoning_budget = *budget;
      request.reasoning_effort = effort_level_for_budget(*budget);
    } else if (const Json* config = find_field(root, "output_config"); config != nullptr && config->is_object()) {
      if (auto effort = optional_string(*config, "effort", "output_config"))
        request.reasoning_budget = reasoning_budget_for_effort(*effort);
    }
    return;
  }
  reject_field("thinking.type", "unknown thinking type \"" + type + "\" (expected enabled, adaptive, between_tools or disabled)");
}

// output_config.effort states the effort outright, with or without thinking, so it sets the level
// whatever thinking says.
void read_effort(const Json& root, ChatRequest& request) {
  const Json* config = find_field(root, "output_config");
  if (config == nullptr || !config->is_object()) return;
  if (auto effort = optional_string(*config, "effort", "output_config")) {
    if (auto level = effort_level_for_effort(*effort)) request.reasoning_effort = *level;
  }
}

// Structured output: output_config.format, or the beta's top-level output_format, {"type":
// "json_schema", "schema": {...}}. Never ignored: a schema keel cannot honour is a 400.
void read_output_format(const Json& root, ChatRequest& request) {
  if (const Json* config = find_field(root, "output_config"); config != nullptr && config->is_object())
    if (const Json* format = find_field(*config, "format"); format != nullptr && !format->is_null())
      read_json_format(*format, "output_config.format", "schema", request);
  if (const Json* format = find_field(root, "output_format"); format != nullptr && !format->is_null())
    read_json_format(*format, "output_format", "schema", request);
}

ChatRequest parse(std::string_view body, const RequestLimits& limits, bool max_tokens_required) {
  Json root = parse_request_object(body, limits.max_json_depth);
  ChatRequest request;
  request.protocol = Protocol::Anthropic;

  request.model = require_string(root, "model", "");
  if (request.model.empty()) reject_field("model", "must not be empty");
  auto max_tokens = optional_int(root, "max_tokens", "");
  if (!max_tokens && max_tokens_required) reject_field("max_tokens", "field required");
  request.max_tokens = checked_max_tokens(max_tokens.value_or(1), "max_tokens", limits);

  const Json& messages = require_array(root, "messages", "");
  check_message_count(messages, limits);
  Json converted = Json::array();
  if (const Json* system = find_field(root, "system")) convert_anthropic_system(*system, converted);
  convert_anthropic_messages(messages, converted);
  request.messages = std::move(converted);
  request.assistant_prefill = messages.back().value("role", "") == "assistant";

  if (const Json* tools = find_field(root, "tools"); tools != nullptr && !tools->is_null())
    request.tools = convert_tools(*tools, limits, request);
  if (const Json* choice = find_field(root, "tool_choice"); choice != nullptr && !choice->is_null())
    read_tool_choice(*choice, request);

  if (auto t = number_in_range(root, "temperature", 0.0, 1.0)) request.temperature = static_cast<float>(*t);
  if (auto p = number_in_range(root, "top_p", 0.0, 1.0)) request.top_p = static_cast<float>(*p);
  if (auto k = optional_int(root, "top_k", "")) {
    if (*k < 0 || *k > INT_MAX) reject_field("top_k", "must be between 0 and " + std::to_string(INT_MAX));
    request.top_k = static_cast<int>(*k);
  }
  if (const Json* stops = find_field(root, "stop_sequences"); stops != nullptr && !stops->is_null())
    request.stop_sequences = read_stop_sequences(*stops);
  request.stream = optional_bool(root, "stream", "").value_or(false);
  if (const Json* thinking = find_field(root, "thinking"); thinking != nullptr && !thinking->is_null())
    read_thinking(*thinking, root, request);
  read_effort(root, request);
  read_output_format(root, request);
  if (const Json* metadata = find_field(root, "metadata"); metadata != nullptr && !metadata->is_null()) {
    expect_object(*metadata, "metadata");
    request.user = optional_string(*metadata, "user_id", "metadata").value_or("");
  }
  return request;
}

}  // namespace

ChatRequest parse_anthropic_request(std::string_view body, const RequestLimits& limits) {
  return parse(body, limits, true);
}

ChatRequest parse_anthropic_count_tokens_request(std::string_view body, const RequestLimits& limits) {
  return parse(body, limits, false);
}

}  // namespace keel::api
