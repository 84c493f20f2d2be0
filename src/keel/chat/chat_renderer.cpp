#include "keel/chat/chat_renderer.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "keel/chat/jinja_template.h"
#include "keel/util/error.h"

namespace keel::chat {
namespace {

using json = nlohmann::ordered_json;

jinja::Tag tag_of(Role r) { return static_cast<jinja::Tag>(r); }

// The role a message's own text belongs to.
Role content_role(const std::string& message_role) {
  if (message_role == "system" || message_role == "developer") return Role::system;
  if (message_role == "assistant" || message_role == "model") return Role::assistant;
  if (message_role == "tool" || message_role == "ipython" || message_role == "function" || message_role == "tool_result")
    return Role::tool_result;
  return Role::user;
}

json normalize_tool_calls(const json& calls) {
  json out = calls;
  for (auto& call : out) {
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
    auto& fn = call["function"];
    if (!fn.contains("arguments") || !fn["arguments"].is_string()) continue;
    json parsed = json::parse(fn["arguments"].get<std::string>(), nullptr, false);
    if (!parsed.is_discarded() && parsed.is_object()) fn["arguments"] = std::move(parsed);
  }
  return out;
}

// A content string whose parts carry different roles: `own` everywhere but in `runs`.
jinja::Value tagged_content(const std::string& content, Role own, std::vector<ContentRun> runs) {
  std::sort(runs.begin(), runs.end(), [](const ContentRun& a, const ContentRun& b) { return a.begin < b.begin; });
  jinja::TaggedText text;
  size_t at = 0;
  for (const auto& run : runs) {
    if (run.begin < at || run.end < run.begin || run.end > content.size())
      throw keel::Error("content run [" + std::to_string(run.begin) + ", " + std::to_string(run.end) +
                        ") of message " + std::to_string(run.message) + " is outside its content or overlaps another");
    text.append(std::string_view(content).substr(at, run.begin - at), tag_of(own));
    text.append(std::string_view(content).substr(run.begin, run.end - run.begin), tag_of(run.role));
    at = run.end;
  }
  text.append(std::string_view(content).substr(at), tag_of(own));
  return jinja::Value::string(std::move(text));
}

// One message as template values, each field tagged with the role its text belongs to. The
// "role" field itself is scaffolding: templates turn it into headers like <|im_start|>user.
// `runs`: parts of the content string with another role.
jinja::Value tag_message(const json& message, bool parse_arguments, std::vector<ContentRun> runs) {
  if (!message.is_object()) throw keel::Error("each message must be a JSON object");
  std::string role = message.contains("role") && message["role"].is_string() ? message["role"].get<std::string>() : "";
  Role own = content_role(role);
  auto d = std::make_shared<jinja::DictData>();
  for (const auto& [key, value] : message.items()) {
    Role r = own;
    if (key == "role") r = Role::scaffolding;
    else if (key == "tool_calls" || key == "function_call") r = Role::tool_call;
    else if (key == "reasoning_content" || key == "reasoning" || key == "thinking") r = Role::reasoning;
    if (key == "content" && !runs.empty()) {
      if (!value.is_string()) throw keel::Error("content runs need a string content");
      d->set(key, tagged_content(value.get_ref<const std::string&>(), own, std::move(runs)));
      runs.clear();
      continue;
    }
    const json& v = (key == "tool_calls" && parse_arguments && value.is_array()) ? normalize_tool_calls(value) : value;
    d->set(key, jinja::value_from_json(v, tag_of(r)));
  }
  if (!runs.empty()) throw keel::Error("content runs for a message without content");
  return jinja::Value::dict(d);
}

std::vector<RoleSpan> spans_of(const jinja::TaggedText& t) {
  std::vector<RoleSpan> spans;
  for (const auto& run : t.covering_runs()) {
    Role r = run.tag < kRoleCount ? static_cast<Role>(run.tag) : Role::scaffolding;
    if (!spans.empty() && spans.back().role == r && spans.back().end == run.begin) {
      spans.back().end = run.end;
    } else {
      spans.push_back({run.begin, run.end, r});
    }
  }
  return spans;
}



}  // namespace

ChatTemplate::ChatTemplate(const std::string& source, std::string bos_token, std::string eos_token)
    : source_(source),
      bos_token_(std::move(bos_token)),
      eos_token_(std::move(eos_token)),
      template_(std::make_unique<jinja::Template>(source)) {}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

RenderedPrompt ChatTemplate::render(const json& messages, const json& tools, const json& kwargs,
                                    const ChatRenderOptions& options, std::span<const ContentRun> content_runs) const {
  if (!messages.is_array()) throw keel::Error("messages must be a JSON array");
  if (!tools.is_null() && !tools.is_array()) throw keel::Error("tools must be a JSON array");
  if (!kwargs.is_null() && !kwargs.is_object()) throw keel::Error("template kwargs must be a JSON object");

  // transformers' apply_chat_template always passes tools and documents, as None when absent,
  // so `tools is not none` and `tools is defined` behave as the template authors tested them.
  jinja::DictData context;
  context.set("bos_token", jinja::Value::string(bos_token_));
  context.set("eos_token", jinja::Value::string(eos_token_));
  if (options.absent_as_none) context.set("documents", jinja::Value::none());
  if (!kwargs.is_null())
    for (const auto& [k, v] : kwargs.items()) context.set(k, jinja::value_from_json(v));
  std::vector<std::vector<ContentRun>> runs(messages.size());
  for (const auto& run : content_runs) {
    if (run.message >= messages.size())
      throw keel::Error("content run for message " + std::to_string(run.message) + " of " + std::to_string(messages.size()));
    runs[run.message].push_back(run);
  }
  std::vector<jinja::Value> tagged;
  tagged.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i)
    tagged.push_back(tag_message(messages[i], options.parse_string_arguments, std::move(runs[i])));
  context.set("messages", jinja::Value::list(std::move(tagged)));
  if (tools.is_array()) context.set("tools", jinja::value_from_json(tools, tag_of(Role::tools)));
  else if (options.absent_as_none) context.set("tools", jinja::Value::none());

  jinja::TaggedText out = template_->render(context, options.jinja);
  RenderedPrompt prompt;
  prompt.spans = spans_of(out);
  prompt.text = out.text();
  return prompt;
}

}  // namespace keel::chat
