#pragma once
// The one finder of a model folder's chat template, for serve, render and plan alike. Folders ship
// it as chat_template.jinja, chat_template.json, or the chat_template field of
// tokenizer_config.json: a string, or a list of named templates, of which "tool_use" (when tools
// are wanted) shows how calls are written. bos/eos token texts come from tokenizer_config.json.
// Plain functions; safe on any thread.
#include <filesystem>
#include <optional>
#include <string>

namespace keel::chat {

struct ChatTemplateText {
  std::string text;
  std::string origin;  // "chat_template.jinja", "tokenizer_config.json (tool_use)", or a file path
};

// nullopt when the folder has none. `want_tools`: prefer a "tool_use" named template over
// "default". Throws keel::Error naming a file that exists but is unreadable or not valid JSON.
std::optional<ChatTemplateText> find_chat_template(const std::filesystem::path& dir, bool want_tools = true);

// A template given on the command line: a .jinja file, or a JSON file with a chat_template field.
ChatTemplateText read_chat_template_file(const std::filesystem::path& file);

// What the renderer needs: the template (as find_chat_template chose it) and the special-token
// texts it may print.
struct ChatTemplateSource {
  std::string source;  // the template text
  std::string origin;
  std::string bos_token;
  std::string eos_token;
};
// nullopt when the folder has no template.
std::optional<ChatTemplateSource> find_chat_template_source(const std::filesystem::path& model_dir, bool want_tools);
// Throws keel::Error when the folder has no template.
ChatTemplateSource load_chat_template_source(const std::filesystem::path& model_dir, bool want_tools = false);

}  // namespace keel::chat
