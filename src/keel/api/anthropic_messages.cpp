#include "keel/api/anthropic_messages.h"

#include <string>
#include <unordered_map>
#include <vector>

#include "keel/api/request_common.h"

namespace keel::api {

namespace {

using ToolNames = std::unordered_map<std::string, std::string>;  // tool_use id -> tool name

bool is_unsupported_media(const std::string& type) { return type == "image" || type == "document"; }

[[noreturn]] void reject_media(const std::string& block_path, const std::string& type) {
  reject_field(block_path, type + " content is not supported yet");
}

std::string block_type(const Json& block, const std::string& path) {
  expect_object(block, path);
  return require_string(block, "type", path);
}

std::string unknown_block(const std::string& type) { return "unknown content block type \"" + type + "\""; }

// Text blocks only: system prompts and tool_result contents.
std::string text_of_blocks(const Json& content, const std::string& path) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) reject_field(path, "expected a string or an array of content blocks, got " + json_type_name(content));
  std::vector<std::string> texts;
  for (size_t i = 0; i < content.size(); ++i) {
    std::string block_path = join_path(path, i);
    std::string type = block_type(content[i], block_path);
    if (type == "text") {
      texts.push_back(require_string(content[i], "text", block_path));
    } else if (is_unsupported_media(type)) {
      reject_media(block_path, type);
    } else {
      reject_field(join_path(block_path, "type"), unknown_block(type));
    }
  }
  return join_texts(texts);
}

Json tool_message(const Json& block, const std::string& path, const ToolNames& names) {
  std::string id = require_string(block, "tool_use_id", path);
  std::string content;
  if (const Json* c = find_field(block, "content"); c != nullptr && !c->is_null())
    content = text_of_blocks(*c, join_path(path, "content"));
  if (optional_bool(block, "is_error", path).value_or(false)) content = "Error: " + content;
  Json message = {{"role", "tool"}, {"tool_call_id", id}};
  if (auto it = names.find(id); it != names.end()) message["name"] = it->second;
  message["content"] = std::move(content);
  return message;
}

void convert_user(const Json& content, const std::string& path, const ToolNames& names, Json& out) {
  if (content.is_string()) {
    out.push_back({{"role", "user"}, {"content", content}});
    return;
  }
  std::vector<std::string> texts;
  bool had_tool_results = false;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& block = content[i];
    std::string block_path = join_path(path, i);
    std::string type = block_type(block, block_path);
    if (type == "text") {
      texts.push_back(require_string(block, "text", block_path));
    } else if (type == "tool_result") {
      out.push_back(tool_message(block, block_path, names));
      had_tool_results = true;
    } else if (is_unsupported_media(type)) {
      reject_media(block_path, type);
    } else if (type == "tool_use" || type == "thinking" || type == "redacted_thinking") {
      reject_field(join_path(block_path, "type"), "\"" + type + "\" blocks are only allowed in assistant messages");
    } else {
      reject_field(join_path(block_path, "type"), unknown_block(type));
    }
  }
  // A turn made only of tool results has no user text to show; any other turn is a user message,
  // even an empty one, so the conversation keeps its shape.
  if (!texts.empty() || !had_tool_results) out.push_back({{"role", "user"}, {"content", join_texts(texts)}});
}

void convert_assistant(const Json& content, const std::string& path, ToolNames& names, Json& out) {
  if (content.is_string()) {
    out.push_back({{"role", "assistant"}, {"content", content}});
    return;
  }
  std::vector<std::string> texts;
  std::vector<std::string> reasoning;
  Json tool_calls = Json::array();
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& block = content[i];
    std::string block_path = join_path(path, i);
    std::string type = block_type(block, block_path);
    if (type == "text") {
      texts.push_back(require_string(block, "text", block_path));
    } else if (type == "thinking") {
      reasoning.push_back(require_string(block, "thinking", block_path));
    } else if (type == "redacted_thinking") {
      continue;
    } else if (type == "tool_use") {
      std::string id = require_string(block, "id", block_path);
      std::string name = require_string(block, "name", block_path);
      const Json& input = require_object(block, "input", block_path);
      names[id] = name;
      tool_calls.push_back({{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", input}}}});
    } else if (is_unsupported_media(type)) {
      reject_media(block_path, type);
    } else if (type == "tool_result") {
      reject_field(join_path(block_path, "type"), "\"tool_result\" blocks are only allowed in user messages");
    } else {
      reject_field(join_path(block_path, "type"), unknown_block(type));
    }
  }
  Json message = {{"role", "assistant"}, {"content", join_texts(texts)}};
  if (!reasoning.empty()) message["reasoning_content"] = join_texts(reasoning);
  if (!tool_calls.empty()) message["tool_calls"] = std::move(tool_calls);
  out.push_back(std::move(message));
}

}  // namespace

void convert_anthropic_system(const Json& system, Json& out) {
  if (system.is_null()) return;
  std::vector<std::string> texts;
  auto keep = [&](const std::string& text) {
    if (text.rfind(kBillingHeaderPrefix, 0) != 0 && !text.empty()) texts.push_back(text);
  };
  if (system.is_string()) {
    keep(system.get<std::string>());
  } else if (system.is_array()) {
    for (size_t i = 0; i < system.size(); ++i) {
      std::string path = join_path("system", i);
      std::string type = block_type(system[i], path);
      if (type != "text") reject_field(join_path(path, "type"), "system blocks must be of type \"text\", got \"" + type + "\"");
      keep(require_string(system[i], "text", path));
    }
  } else {
    reject_field("system", "expected a string or an array of text blocks, got " + json_type_name(system));
  }
  if (!texts.empty()) out.push_back({{"role", "system"}, {"content", join_texts(texts)}});
}

void convert_anthropic_messages(const Json& messages, Json& out) {
  ToolNames names;
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& message = messages[i];
    std::string path = join_path("messages", i);
    expect_object(message, path);
    std::string role = require_string(message, "role", path);
    const Json& content = require_field(message, "content", path);
    std::string content_path = join_path(path, "content");
    if (!content.is_string() && !content.is_array())
      reject_field(content_path, "expected a string or an array of content blocks, got " + json_type_name(content));
    if (role == "user") {
      convert_user(content, content_path, names, out);
    } else if (role == "assistant") {
      convert_assistant(content, content_path, names, out);
    } else if (role == "system") {
      // Mid-conversation system message (beta mid-conversation-system-2026-04-07): kept in place;
      // chat::render_conversation folds it into a user turn for templates that refuse it there.
      std::string text = text_of_blocks(content, content_path);
      if (!text.empty()) out.push_back({{"role", "system"}, {"content", std::move(text)}});
    } else {
      reject_field(join_path(path, "role"),
                   "unknown role \"" + role + "\" (expected \"user\", \"assistant\" or \"system\")");
    }
  }
}

}  // namespace keel::api
