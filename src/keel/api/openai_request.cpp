#include "keel/api/openai_request.h"

#include <set>

#include "keel/api/openai_messages.h"
#include "keel/api/request_common.h"

namespace keel::api {

namespace {

Json check_tools(const Json& tools, const RequestLimits& limits) {
  if (!tools.is_array()) reject_field("tools", "expected an array, got " + json_type_name(tools));
  check_tool_count(tools, limits);
  if (tools.empty()) return nullptr;
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& tool = tools[i];
    std::string path = join_path("tools", i);
    expect_object(tool, path);
    std::string type = require_string(tool, "type", path);
    if (type != "function") reject_field(join_path(path, "type"), "tool type \"" + type + "\" is not supported (expected \"function\")");
    const Json& function = require_object(tool, "function", path);
    std::string function_path = join_path(path, "function");
    std::string name = require_string(function, "name", function_path);
    if (name.empty()) reject_field(join_path(function_path, "name"), "must not be empty");
    if (!names.insert(name).second) reject_field(join_path(function_path, "name"), "duplicate tool name \"" + name + "\"");
    optional_string(function, "description", function_path);
    if (const Json* p = find_field(function, "parameters"); p != nullptr && !p->is_null()) expect_object(*p, join_path(function_path, "parameters"));
  }
  return tools;  // as sent: the template renders exactly what the client wrote
}

void read_tool_choice(const Json& choice, ChatRequest& request) {
  if (choice.is_string()) {
    const auto& mode = choice.get_ref<const std::string&>();
    if (mode == "auto") {
      request.tool_choice = ToolChoiceMode::Auto;
    } else if (mode == "none") {
      request.tool_choice = ToolChoiceMode::None;
    } else if (mode == "required") {
      request.tool_choice = ToolChoiceMode::Any;
    } else {
      reject_field("tool_choice", "unknown tool_choice \"" + mode + "\" (expected auto, none or required)");
    }
  } else if (choice.is_object()) {
    if (auto type = optional_string(choice, "type", "tool_choice"); type && *type != "function")
      reject_field("tool_choice.type", "expected \"function\", got \"" + *type + "\"");
    const Json& function = require_object(choice, "function", "tool_choice");
    request.tool_choice = ToolChoiceMode::Tool;
    request.tool_choice_name = require_string(function, "name", "tool_choice.function");
  } else {
    reject_field("tool_choice", "expected a string or an object, got " + json_type_name(choice));
  }
  check_tool_choice_against_tools(request, "tool_choice");
}

std::vector<std::string> read_stop(const Json& stop) {
  std::vector<std::string> out;
  if (stop.is_string()) {
    if (!stop.get_ref<const std::string&>().empty()) out.push_back(stop.get<std::string>());
    return out;
  }
  if (!stop.is_array()) reject_field("stop", "expected a string or an array of strings, got " + json_type_name(stop));
  for (size_t i = 0; i < stop.size(); ++i) {
    std::string s = expect_string(stop[i], join_path("stop", i));
    if (s.empty()) reject_field(join_path("stop", i), "must not be empty");
    out.push_back(std::move(s));
  }
  return out;
}

// Output controls: response_format; those keel does not implement are refused, never silently ignored.
void read_outputs(const Json& root, ChatRequest& request) {  // and the sampling adjustments
  if (const Json* format = find_field(root, "response_format"); format != nullptr && !format->is_null())
    read_json_format(*format, "response_format", "json_schema.schema", request);
  if (auto p = number_in_range(root, "presence_penalty", -2.0, 2.0)) request.presence_penalty = static_cast<float>(*p);
  if (auto p = number_in_range(root, "frequency_penalty", -2.0, 2.0)) request.frequency_penalty = static_cast<float>(*p);
  // logit_bias: {"TOKEN_ID": bias}, bias in [-100, 100].
  if (const Json* bias = find_field(root, "logit_bias"); bias != nullptr && !bias->is_null()) {
    expect_object(*bias, "logit_bias");
    for (const auto& [key, value] : bias->items()) {
      const std::string path = join_path("logit_bias", key);
      size_t used = 0;
      long long id = -1;
      try {
        id = std::stoll(key, &used);
      } catch (const std::exception&) {
      }
      if (key.empty() || used != key.size() || id < 0 || id > INT32_MAX)
        reject_field(path, "a key must be a token id (a non-negative integer)");
      if (!value.is_number() || value.get<double>() < -100 || value.get<double>() > 100)
        reject_field(path, "expected a number from -100 to 100");
      request.logit_bias.emplace_back(static_cast<int32_t>(id), value.get<float>());
    }
  }
  if (auto p = optional_number(root, "repetition_penalty", "")) {
    if (!(*p > 0 && *p <= 10)) reject_field("repetition_penalty", "expected a number above 0 and at most 10 (1 is off)");
    request.repetition_penalty = static_cast<float>(*p);
  }
  const bool logprobs = optional_bool(root, "logprobs", "").value_or(false);
  const auto top = optional_int(root, "top_logprobs", "");
  if (top && (*top < 0 || *top > 20)) reject_field("top_logprobs", "expected an integer from 0 to 20");
  if (top && !logprobs) reject_field("top_logprobs", "needs logprobs: true");
  if (logprobs) request.top_logprobs = static_cast<int>(top.value_or(0));
}

}  // namespace

ChatRequest parse_openai_request(std::string_view body, const RequestLimits& limits) {
  Json root = parse_request_object(body, limits.max_json_depth);
  ChatRequest request;
  request.protocol = Protocol::OpenAI;

  request.model = require_string(root, "model", "");
  if (request.model.empty()) reject_field("model", "must not be empty");

  const Json& messages = require_array(root, "messages", "");
  check_message_count(messages, limits);
  Json converted = Json::array();
  convert_openai_messages(messages, converted);
  request.messages = std::move(converted);
  request.assistant_prefill = request.messages.back()["role"] == "assistant";

  if (const Json* tools = find_field(root, "tools"); tools != nullptr && !tools->is_null())
    request.tools = check_tools(*tools, limits);
  if (request.tools.is_array())
    for (size_t i = 0; i < request.tools.size(); ++i)
      read_tool_strict(request.tools[i]["function"], join_path(join_path("tools", i), "function"),
                       request.tools[i]["function"]["name"].get<std::string>(), request);
  if (const Json* choice = find_field(root, "tool_choice"); choice != nullptr && !choice->is_null())
    read_tool_choice(*choice, request);
  request.parallel_tool_calls = optional_bool(root, "parallel_tool_calls", "").value_or(true);

  // max_completion_tokens replaced max_tokens; a client sending both means the newer one.
  std::string tokens_field = "max_completion_tokens";
  auto max_tokens = optional_int(root, tokens_field, "");
  if (!max_tokens) {
    tokens_field = "max_tokens";
    max_tokens = optional_int(root, tokens_field, "");
  }
  request.max_tokens = checked_max_tokens(max_tokens.value_or(kDefaultOpenAIMaxTokens), tokens_field, limits);

  if (auto n = optional_int(root, "n", "")) {
    if (*n < 1 || *n > kMaxChoices) reject_field("n", "expected an integer from 1 to " + std::to_string(kMaxChoices));
    request.n = static_cast<int>(*n);
  }
  read_openai_sampling(root, request);
  if (const Json* stop = find_field(root, "stop"); stop != nullptr && !stop->is_null()) request.stop_sequences = read_stop(*stop);
  request.stream = optional_bool(root, "stream", "").value_or(false);
  if (request.stream && request.n > 1) reject_field("n", "n > 1 is answered without streaming only; set stream to false");
  if (const Json* options = find_field(root, "stream_options"); options != nullptr && !options->is_null()) {
    expect_object(*options, "stream_options");
    request.include_usage = optional_bool(*options, "include_usage", "stream_options").value_or(false);
  }
  if (auto effort = optional_string(root, "reasoning_effort", "")) apply_reasoning_effort(*effort, request);
  read_outputs(root, request);
  request.user = optional_string(root, "prompt_cache_key", "").value_or(optional_string(root, "user", "").value_or(""));
  return request;
}

}  // namespace keel::api
