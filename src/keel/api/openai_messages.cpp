#include "keel/api/openai_messages.h"

#include <string>
#include <vector>

#include "keel/api/request_common.h"

namespace keel::api {

namespace {

bool is_media_part(const std::string& type) {
  return type == "image_url" || type == "input_image" || type == "image" || type == "input_audio" || type == "file";
}

std::string text_of_content(const Json& content, const std::string& path) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) reject_field(path, "expected a string or an array of content parts, got " + json_type_name(content));
  std::vector<std::string> texts;
  for (size_t i = 0; i < content.size(); ++i) {
    std::string part_path = join_path(path, i);
    expect_object(content[i], part_path);
    std::string type = require_string(content[i], "type", part_path);
    if (type == "text") {
      texts.push_back(require_string(content[i], "text", part_path));
    } else if (is_media_part(type)) {
      reject_field(part_path, (type == "input_audio" ? "audio" : type == "file" ? "file" : "image") +
                                  std::string(" content is not supported yet"));
    } else {
      reject_field(join_path(part_path, "type"), "unknown content part type \"" + type + "\"");
    }
  }
  return join_texts(texts);
}

Json convert_tool_call(const Json& call, const std::string& path) {
  expect_object(call, path);
  std::string id = require_string(call, "id", path);
  if (auto type = optional_string(call, "type", path); type && *type != "function")
    reject_field(join_path(path, "type"), "unknown tool call type \"" + *type + "\" (expected \"function\")");
  const Json& function = require_object(call, "function", path);
  std::string function_path = join_path(path, "function");
  std::string name = require_string(function, "name", function_path);
  const Json& arguments = require_field(function, "arguments", function_path);
  if (!arguments.is_string() && !arguments.is_object())
    reject_field(join_path(function_path, "arguments"), "expected a JSON string or an object, got " + json_type_name(arguments));
  return {{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", arguments}}}};
}

Json convert_assistant(const Json& message, const std::string& path) {
  std::string content;
  if (const Json* c = find_field(message, "content"); c != nullptr && !c->is_null())
    content = text_of_content(*c, join_path(path, "content"));
  Json out = {{"role", "assistant"}, {"content", std::move(content)}};
  auto reasoning = optional_string(message, "reasoning_content", path);
  if (!reasoning) reasoning = optional_string(message, "reasoning", path);
  if (reasoning) out["reasoning_content"] = *reasoning;
  if (const Json* calls = find_field(message, "tool_calls"); calls != nullptr && !calls->is_null()) {
    std::string calls_path = join_path(path, "tool_calls");
    if (!calls->is_array()) reject_field(calls_path, "expected an array, got " + json_type_name(*calls));
    Json converted = Json::array();
    for (size_t i = 0; i < calls->size(); ++i) converted.push_back(convert_tool_call((*calls)[i], join_path(calls_path, i)));
    if (!converted.empty()) out["tool_calls"] = std::move(converted);
  }
  return out;
}

Json convert_tool(const Json& message, const std::string& path) {
  Json out = {{"role", "tool"}, {"tool_call_id", require_string(message, "tool_call_id", path)}};
  if (auto name = optional_string(message, "name", path)) out["name"] = *name;
  out["content"] = text_of_content(require_field(message, "content", path), join_path(path, "content"));
  return out;
}

}  // namespace

void convert_openai_messages(const Json& messages, Json& out) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& message = messages[i];
    std::string path = join_path("messages", i);
    expect_object(message, path);
    std::string role = require_string(message, "role", path);
    if (role == "system" || role == "developer" || role == "user") {
      std::string content = text_of_content(require_field(message, "content", path), join_path(path, "content"));
      out.push_back({{"role", role == "developer" ? "system" : role}, {"content", std::move(content)}});
    } else if (role == "assistant") {
      out.push_back(convert_assistant(message, path));
    } else if (role == "tool") {
      out.push_back(convert_tool(message, path));
    } else {
      reject_field(join_path(path, "role"),
                   "unknown role \"" + role + "\" (expected system, developer, user, assistant or tool)");
    }
  }
}

}  // namespace keel::api
