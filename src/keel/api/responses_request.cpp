#include "keel/api/responses_request.h"

#include <map>
#include <set>

#include "keel/api/request_common.h"

namespace keel::api {

namespace {

// Text of a message's content: a string or parts. Responses parts are input_text (client turns),
// output_text and refusal (the assistant's own earlier output); "text" is accepted as Chat
// Completions spells it.
std::string text_of_content(const Json& content, const std::string& path) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) reject_field(path, "expected a string or an array of content parts, got " + json_type_name(content));
  std::vector<std::string> texts;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string part_path = join_path(path, i);
    expect_object(content[i], part_path);
    const std::string type = require_string(content[i], "type", part_path);
    if (type == "input_text" || type == "output_text" || type == "text") {
      texts.push_back(require_string(content[i], "text", part_path));
    } else if (type == "refusal") {
      texts.push_back(require_string(content[i], "refusal", part_path));
    } else if (type == "input_image" || type == "input_file" || type == "input_audio") {
      reject_field(join_path(part_path, "type"), "\"" + type + "\" content is not supported yet");
    } else {
      reject_field(join_path(part_path, "type"), "unknown content part type \"" + type + "\"");
    }
  }
  return join_texts(texts);
}

// The text of a reasoning item: its reasoning_text content, else its summary.
std::string reasoning_text(const Json& item, const std::string& path) {
  std::vector<std::string> texts;
  for (const char* key : {"content", "summary"}) {
    const Json* parts = find_field(item, key);
    if (parts == nullptr) continue;
    const std::string parts_path = join_path(path, key);
    if (!parts->is_array()) reject_field(parts_path, "expected an array, got " + json_type_name(*parts));
    for (size_t i = 0; i < parts->size(); ++i) {
      expect_object((*parts)[i], join_path(parts_path, i));
      texts.push_back(require_string((*parts)[i], "text", join_path(parts_path, i)));
    }
    if (!texts.empty()) break;
  }
  return join_texts(texts);
}

// Builds the chat messages from the items, in order.
class InputConverter {
 public:
  explicit InputConverter(Json& out) : out_(out) {}

  void item(const Json& item, const std::string& path) {
    expect_object(item, path);
    std::string type = optional_string(item, "type", path).value_or("");
    if (type.empty() && find_field(item, "role") != nullptr) type = "message";
    if (type == "message") return message(item, path);
    if (type == "function_call") return function_call(item, path);
    if (type == "function_call_output") return function_call_output(item, path);
    if (type == "reasoning") return reasoning(item, path);
    if (type.empty()) reject_field(path, "an input item needs a \"type\" (or a \"role\" for a message)");
    reject_field(join_path(path, "type"), "input item type \"" + type +
                                              "\" is not supported (expected message, function_call, "
                                              "function_call_output or reasoning)");
  }

 private:
  void message(const Json& item, const std::string& path) {
    const std::string role = require_string(item, "role", path);
    std::string content = text_of_content(require_field(item, "content", path), join_path(path, "content"));
    if (role == "assistant") {
      Json& turn = assistant_turn();
      std::string& text = turn["content"].get_ref<std::string&>();
      text += text.empty() || content.empty() ? "" : std::string(kTextBlockSeparator);
      text += content;
      return;
    }
    if (role != "user" && role != "system" && role != "developer")
      reject_field(join_path(path, "role"), "unknown role \"" + role + "\" (expected user, system, developer or assistant)");
    flush_reasoning();
    out_.push_back({{"role", role == "user" ? "user" : "system"}, {"content", std::move(content)}});
  }

  void function_call(const Json& item, const std::string& path) {
    const std::string call_id = require_string(item, "call_id", path);
    const std::string name = require_string(item, "name", path);
    const Json& arguments = require_field(item, "arguments", path);
    if (!arguments.is_string() && !arguments.is_object())
      reject_field(join_path(path, "arguments"), "expected a JSON string or an object, got " + json_type_name(arguments));
    Json& turn = assistant_turn();
    if (!turn.contains("tool_calls")) turn["tool_calls"] = Json::array();
    turn["tool_calls"].push_back(
        {{"id", call_id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", arguments}}}});
    call_names_[call_id] = name;
  }

  void function_call_output(const Json& item, const std::string& path) {
    flush_reasoning();
    const std::string call_id = require_string(item, "call_id", path);
    Json message = {{"role", "tool"}, {"tool_call_id", call_id}};
    if (auto it = call_names_.find(call_id); it != call_names_.end()) message["name"] = it->second;
    message["content"] = text_of_content(require_field(item, "output", path), join_path(path, "output"));
    out_.push_back(std::move(message));
  }

  // Reasoning precedes the output it led to: it joins the current assistant turn, or the next one.
  void reasoning(const Json& item, const std::string& path) {
    std::string text = reasoning_text(item, path);
    if (text.empty()) return;
    if (!out_.empty() && out_.back()["role"] == "assistant") {
      Json& turn = out_.back();
      const std::string before = turn.value("reasoning_content", "");
      turn["reasoning_content"] = before.empty() ? text : before + std::string(kTextBlockSeparator) + text;
      return;
    }
    pending_reasoning_ += pending_reasoning_.empty() ? text : std::string(kTextBlockSeparator) + text;
  }

  // The assistant message the next assistant item belongs to: the last message when it is one.
  Json& assistant_turn() {
    if (out_.empty() || out_.back()["role"] != "assistant") {
      Json turn = {{"role", "assistant"}, {"content", ""}};
      if (!pending_reasoning_.empty()) turn["reasoning_content"] = std::exchange(pending_reasoning_, {});
      out_.push_back(std::move(turn));
    }
    return out_.back();
  }

  // Reasoning with no assistant output after it (a turn cut short) has nothing to attach to.
  void flush_reasoning() { pending_reasoning_.clear(); }

  Json& out_;
  std::map<std::string, std::string> call_names_;
  std::string pending_reasoning_;
};

Json convert_tools(const Json& tools, const RequestLimits& limits, ChatRequest& request) {
  if (!tools.is_array()) reject_field("tools", "expected an array, got " + json_type_name(tools));
  check_tool_count(tools, limits);
  if (tools.empty()) return nullptr;
  Json out = Json::array();
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& tool = tools[i];
    const std::string path = join_path("tools", i);
    expect_object(tool, path);
    const std::string type = require_string(tool, "type", path);
    if (type != "function")
      reject_field(join_path(path, "type"), "tool type \"" + type + "\" is not supported (keel serves function tools only)");
    const std::string name = require_string(tool, "name", path);
    if (name.empty()) reject_field(join_path(path, "name"), "must not be empty");
    if (!names.insert(name).second) reject_field(join_path(path, "name"), "duplicate tool name \"" + name + "\"");
    Json function = {{"name", name}};
    if (auto description = optional_string(tool, "description", path)) function["description"] = *description;
    if (const Json* p = find_field(tool, "parameters"); p != nullptr && !p->is_null()) {
      expect_object(*p, join_path(path, "parameters"));
      function["parameters"] = *p;
    }
    read_tool_strict(tool, path, name, request);
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return out;
}

void read_tool_choice(const Json& choice, ChatRequest& request) {
  if (choice.is_string()) {
    const auto& mode = choice.get_ref<const std::string&>();
    if (mode == "auto") request.tool_choice = ToolChoiceMode::Auto;
    else if (mode == "none") request.tool_choice = ToolChoiceMode::None;
    else if (mode == "required") request.tool_choice = ToolChoiceMode::Any;
    else reject_field("tool_choice", "unknown tool_choice \"" + mode + "\" (expected auto, none or required)");
  } else if (choice.is_object()) {
    const std::string type = require_string(choice, "type", "tool_choice");
    if (type != "function") reject_field("tool_choice.type", "expected \"function\", got \"" + type + "\"");
    request.tool_choice = ToolChoiceMode::Tool;
    request.tool_choice_name = require_string(choice, "name", "tool_choice");
  } else {
    reject_field("tool_choice", "expected a string or an object, got " + json_type_name(choice));
  }
  check_tool_choice_against_tools(request, "tool_choice");
}

// What keel cannot honour is refused by name, never ignored; text.format is read.
void read_outputs(const Json& root, ChatRequest& request) {
  for (const char* key : {"previous_response_id", "conversation"})
    if (const Json* v = find_field(root, key); v != nullptr && !v->is_null())
      reject_field(key, "keel keeps no responses to continue from; send the whole conversation as input (and store: false)");
  if (optional_bool(root, "background", "").value_or(false))
    reject_field("background", "background responses are not supported; omit background");
  if (const Json* prompt = find_field(root, "prompt"); prompt != nullptr && !prompt->is_null())
    reject_field("prompt", "stored prompt templates are not supported; send instructions and input");
  if (const Json* top = find_field(root, "top_logprobs"); top != nullptr && !top->is_null())
    reject_field("top_logprobs", "log probabilities are served through Chat Completions only; omit top_logprobs");
  if (const Json* include = find_field(root, "include"); include != nullptr && include->is_array())
    for (size_t i = 0; i < include->size(); ++i)
      if ((*include)[i] == "message.output_text.logprobs")
        reject_field(join_path("include", i), "log probabilities are served through Chat Completions only; omit it");
  if (const Json* text = find_field(root, "text"); text != nullptr && !text->is_null()) {
    expect_object(*text, "text");
    if (const Json* format = find_field(*text, "format"); format != nullptr && !format->is_null())
      read_json_format(*format, "text.format", "schema", request);
  }
  if (auto truncation = optional_string(root, "truncation", ""); truncation && *truncation != "disabled" && *truncation != "auto")
    reject_field("truncation", "expected \"disabled\" or \"auto\", got \"" + *truncation + "\"");
}

}  // namespace

ChatRequest parse_responses_request(std::string_view body, const RequestLimits& limits) {
  Json root = parse_request_object(body, limits.max_json_depth);
  ChatRequest request;
  request.protocol = Protocol::Responses;
  request.model = require_string(root, "model", "");
  if (request.model.empty()) reject_field("model", "must not be empty");
  read_outputs(root, request);

  Json messages = Json::array();
  if (auto instructions = optional_string(root, "instructions", ""); instructions && !instructions->empty())
    messages.push_back({{"role", "system"}, {"content", *instructions}});
  const Json& input = require_field(root, "input", "");
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input.get<std::string>()}});
  } else if (input.is_array()) {
    if (input.size() > limits.max_messages)
      reject_field("input", std::to_string(input.size()) + " items is more than this server's limit of " +
                                std::to_string(limits.max_messages));
    InputConverter converter(messages);
    for (size_t i = 0; i < input.size(); ++i) converter.item(input[i], join_path("input", i));
  } else {
    reject_field("input", "expected a string or an array of items, got " + json_type_name(input));
  }
  if (messages.empty() || (messages.size() == 1 && messages[0]["role"] == "system"))
    reject_field("input", "must contain at least one message or item");
  request.messages = std::move(messages);
  const Json& last = request.messages.back();
  request.assistant_prefill = last["role"] == "assistant" && !last.contains("tool_calls");

  if (const Json* tools = find_field(root, "tools"); tools != nullptr && !tools->is_null())
    request.tools = convert_tools(*tools, limits, request);
  if (const Json* choice = find_field(root, "tool_choice"); choice != nullptr && !choice->is_null())
    read_tool_choice(*choice, request);
  request.parallel_tool_calls = optional_bool(root, "parallel_tool_calls", "").value_or(true);
  request.max_tokens = checked_max_tokens(optional_int(root, "max_output_tokens", "").value_or(kDefaultOpenAIMaxTokens),
                                          "max_output_tokens", limits);
  read_openai_sampling(root, request);
  request.stream = optional_bool(root, "stream", "").value_or(false);
  if (const Json* reasoning = find_field(root, "reasoning"); reasoning != nullptr && !reasoning->is_null()) {
    expect_object(*reasoning, "reasoning");
    if (auto effort = optional_string(*reasoning, "effort", "reasoning")) apply_reasoning_effort(*effort, request);
  }
  request.user = optional_string(root, "prompt_cache_key", "").value_or(optional_string(root, "user", "").value_or(""));
  return request;
}

}  // namespace keel::api
