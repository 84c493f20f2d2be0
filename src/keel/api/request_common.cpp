#include "keel/api/request_common.h"

#include "keel/constrain/json_schema.h"
#include "keel/engine/output_constraint.h"

#include <climits>
#include <cstdio>

namespace keel::api {

std::string join_texts(const std::vector<std::string>& texts) {
  std::string out;
  for (size_t i = 0; i < texts.size(); ++i) {
    if (i > 0) out += kTextBlockSeparator;
    out += texts[i];
  }
  return out;
}

int64_t checked_max_tokens(int64_t requested, const std::string& field, const RequestLimits& limits) {
  if (requested < 1) reject_field(field, "must be at least 1, got " + std::to_string(requested));
  if (requested > limits.max_tokens_cap) {
    if (limits.reject_max_tokens_over_cap)
      reject_field(field, std::to_string(requested) + " is more than this server's limit of " +
                              std::to_string(limits.max_tokens_cap));
    return limits.max_tokens_cap;
  }
  return requested;
}

std::optional<double> number_in_range(const Json& object, std::string_view key, double lo, double hi) {
  auto value = optional_number(object, key, "");
  if (value && !(*value >= lo && *value <= hi)) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "must be between %g and %g, got %g", lo, hi, *value);
    reject_field(std::string(key), buf);
  }
  return value;
}

void read_openai_sampling(const Json& root, ChatRequest& request) {
  if (auto t = number_in_range(root, "temperature", 0.0, 2.0)) request.temperature = static_cast<float>(*t);
  if (auto p = number_in_range(root, "top_p", 0.0, 1.0)) request.top_p = static_cast<float>(*p);
  if (auto k = optional_int(root, "top_k", "")) {
    if (*k < -1 || *k > INT_MAX) reject_field("top_k", "must be -1 (off) or between 0 and " + std::to_string(INT_MAX));
    request.top_k = *k < 0 ? 0 : static_cast<int>(*k);
  }
  if (auto seed = optional_int(root, "seed", "")) request.seed = static_cast<uint64_t>(*seed);
}

void apply_reasoning_effort(const std::string& effort, ChatRequest& request) {
  // "none" turns thinking off; for a template with effort levels that is still "low"
  // (effort_level_for_effort), since gpt-oss cannot stop reasoning.
  request.reasoning_effort = effort_level_for_effort(effort);
  if (effort != "none") {
    request.thinking = true;
    request.reasoning_budget = reasoning_budget_for_effort(effort);
  }
}

void check_message_count(const Json& messages, const RequestLimits& limits) {
  if (messages.empty()) reject_field("messages", "must contain at least one message");
  if (messages.size() > limits.max_messages)
    reject_field("messages", std::to_string(messages.size()) + " messages is more than this server's limit of " +
                                 std::to_string(limits.max_messages));
}

void check_tool_count(const Json& tools, const RequestLimits& limits) {
  if (tools.size() > limits.max_tools)
    reject_field("tools", std::to_string(tools.size()) + " tools is more than this server's limit of " +
                              std::to_string(limits.max_tools));
}

void check_tool_choice_against_tools(const ChatRequest& request, const std::string& field) {
  bool has_tools = request.tools.is_array() && !request.tools.empty();
  if ((request.tool_choice == ToolChoiceMode::Any || request.tool_choice == ToolChoiceMode::Tool) && !has_tools)
    reject_field(field, "requires tools, and the request has none");
  if (request.tool_choice != ToolChoiceMode::Tool) return;
  for (const auto& tool : request.tools) {
    const Json* function = find_field(tool, "function");
    const Json* name = function != nullptr ? find_field(*function, "name") : nullptr;
    if (name != nullptr && *name == request.tool_choice_name) return;
  }
  reject_field(field, "no tool named \"" + request.tool_choice_name + "\" in tools");
}

}  // namespace keel::api

namespace keel::api {

std::optional<int64_t> reasoning_budget_for_effort(std::string_view effort) {
  if (effort == "minimal") return 512;
  if (effort == "low") return 2048;
  if (effort == "medium") return 8192;
  if (effort == "high") return 24576;
  return std::nullopt;
}

void read_json_format(const Json& format, const std::string& path, std::string_view schema_at, ChatRequest& request) {
  expect_object(format, path);
  const std::string type = require_string(format, "type", path);
  if (type == "text") return;
  if (type == "json_object") {
    request.answer_grammar = any_object_grammar();
    return;
  }
  if (type != "json_schema")
    reject_field(join_path(path, "type"), "expected \"text\", \"json_object\" or \"json_schema\", got \"" + type + "\"");
  const Json* at = &format;
  std::string where = path;
  for (size_t begin = 0; begin < schema_at.size();) {
    const size_t end = std::min(schema_at.find('.', begin), schema_at.size());
    const std::string key(schema_at.substr(begin, end - begin));
    where = join_path(where, key);
    const Json* next = find_field(*at, key);
    if (next == nullptr || next->is_null()) reject_field(where, "required for a json_schema format");
    at = next;
    begin = end + 1;
  }
  if (!at->is_object() && !at->is_boolean()) reject_field(where, "expected a JSON Schema object");
  try {
    request.answer_grammar = compile_answer_grammar(*at, where);
  } catch (const constrain::SchemaError& e) {
    // The message starts with the schema's path; the param names the keyword's place.
    const std::string message = e.what();
    reject_field(message.substr(0, message.find(':')), message.substr(std::min(message.find(':') + 2, message.size())));
  }
}

void read_tool_strict(const Json& tool, const std::string& path, const std::string& name, ChatRequest& request) {
  if (auto strict = optional_bool(tool, "strict", path)) request.tool_strict[name] = *strict;
}

}  // namespace keel::api
