#pragma once
// Renders a conversation through the model's own chat template and labels every byte of the
// result with its role.
//
// Roles come from provenance, not from parsing the output: before rendering, each value handed to
// the template is tagged with the role it belongs to (a user message's content -> user, the tools
// list -> tools, an assistant's tool_calls -> tool_call, ...). The interpreter carries tags through
// string operations and records, for every byte it outputs, which tagged value it came from.
// Whatever the template writes by itself is scaffolding. See docs/chat-templates.md.
//
// Threads: a ChatTemplate owns its parsed template and is immutable after construction. render() is
// const and keeps its state per call: many threads may render at once (keel serve renders on its
// HTTP threads). Moving a ChatTemplate must not overlap a render.
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "keel/chat/chat_roles.h"
#include "keel/chat/template_files.h"
#include "keel/chat/jinja_evaluator.h"

namespace keel::jinja {
class Template;
}

namespace keel::chat {

struct RenderedPrompt {
  std::string text;
  std::vector<RoleSpan> spans;  // sorted, contiguous, covering text
};

// Part of a message's content (a string) whose text belongs to another role than the message's
// own: system text folded into a user message (see system_fold.h). [begin, end) are byte offsets
// in that content string.
struct ContentRun {
  size_t message = 0;
  size_t begin = 0;
  size_t end = 0;
  Role role = Role::user;
  bool operator==(const ContentRun&) const = default;
};

struct ChatRenderOptions {
  // OpenAI clients send function.arguments as a JSON string; templates expect an object
  // (`arguments | tojson`, `arguments.items()`). When set, a string that parses as a JSON object
  // is replaced by that object (key order kept) before rendering.
  bool parse_string_arguments = true;
  // transformers passes `tools` and `documents` as None when the request has none. Off: leave them
  // undefined, as the conformance fixtures' contexts do.
  bool absent_as_none = true;
  jinja::RenderOptions jinja;
};

class ChatTemplate {
 public:
  // Throws keel::Error when the template does not parse.
  ChatTemplate(const std::string& source, std::string bos_token = "", std::string eos_token = "");
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // messages: OpenAI-format array. tools: array of {"type":"function","function":{...}}, or null
  // for none (passed to the template as None, like transformers). kwargs: extra template variables
  // (add_generation_prompt, enable_thinking, ...); bos_token and eos_token are supplied unless
  // kwargs sets them. Throws keel::Error when the template raises. `content_runs` give parts of
  // some messages' content another role (any order; a run outside its content is an error).
  RenderedPrompt render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                        const nlohmann::ordered_json& kwargs, const ChatRenderOptions& options = {},
                        std::span<const ContentRun> content_runs = {}) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::string bos_token_;
  std::string eos_token_;
  std::unique_ptr<jinja::Template> template_;
};

}  // namespace keel::chat
