#pragma once
// Finds a model folder's chat template the way Hugging Face folders ship it: chat_template.jinja,
// chat_template.json, or the chat_template field of tokenizer_config.json (a string, or a list of
// named templates where the tool-use variant is the one that shows how calls are written).
#include <filesystem>
#include <optional>
#include <string>

namespace keel::plan {

struct ChatTemplateText {
  std::string text;
  std::string source;  // "tokenizer_config.json", "chat_template.jinja", "tokenizer_config.json (tool_use)"
};

// nullopt when the folder has none. Throws keel::Error naming a file that exists but is unreadable
// or not valid JSON.
std::optional<ChatTemplateText> find_chat_template(const std::filesystem::path& dir);

// A template given on the command line: a .jinja file, or a JSON file with a chat_template field.
ChatTemplateText read_chat_template_file(const std::filesystem::path& file);

}  // namespace keel::plan
