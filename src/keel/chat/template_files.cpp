#include "keel/chat/template_files.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "keel/util/error.h"

namespace keel::chat {
namespace fs = std::filesystem;
namespace {

using nlohmann::json;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot read");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

json read_json_object(const fs::path& path) {
  json j = json::parse(read_file(path), nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error(path.string() + ": not valid JSON");
  return j;
}

// The chat_template field: a string, or [{"name": ..., "template": ...}, ...].
std::optional<ChatTemplateText> template_from_json(const fs::path& path, bool want_tools) {
  const json j = read_json_object(path);
  auto it = j.find("chat_template");
  if (it == j.end() || it->is_null()) return std::nullopt;
  const std::string file = path.filename().string();
  if (it->is_string()) return ChatTemplateText{it->get<std::string>(), file};
  if (!it->is_array()) throw Error(path.string() + ": chat_template must be a string or a list of named templates");
  std::optional<ChatTemplateText> chosen;
  for (const auto& entry : *it) {
    if (!entry.is_object() || !entry.contains("template") || !entry["template"].is_string()) continue;
    const std::string name = entry.value("name", std::string("default"));
    if (want_tools && name == "tool_use") return ChatTemplateText{entry["template"].get<std::string>(), file + " (tool_use)"};
    if (!chosen || name == "default") chosen = ChatTemplateText{entry["template"].get<std::string>(), file + " (" + name + ")"};
  }
  return chosen;
}

// tokenizer_config.json writes special tokens either as strings or as {"content": ...} objects.
std::string token_text(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return "";
}

}  // namespace

std::optional<ChatTemplateText> find_chat_template(const fs::path& dir, bool want_tools) {
  if (fs::is_regular_file(dir / "chat_template.jinja"))
    return ChatTemplateText{read_file(dir / "chat_template.jinja"), "chat_template.jinja"};
  for (const char* name : {"chat_template.json", "tokenizer_config.json"}) {
    if (!fs::is_regular_file(dir / name)) continue;
    if (auto t = template_from_json(dir / name, want_tools)) return t;
  }
  return std::nullopt;
}

ChatTemplateText read_chat_template_file(const fs::path& file) {
  if (file.extension() == ".json") {
    auto t = template_from_json(file, /*want_tools=*/true);
    if (!t) throw Error(file.string() + ": missing key 'chat_template'");
    t->origin = file.string();
    return *t;
  }
  return {read_file(file), file.string()};
}

std::optional<ChatTemplateSource> find_chat_template_source(const fs::path& model_dir, bool want_tools) {
  auto t = find_chat_template(model_dir, want_tools);
  if (!t) return std::nullopt;
  ChatTemplateSource src;
  src.source = std::move(t->text);
  src.origin = std::move(t->origin);
  if (const fs::path config = model_dir / "tokenizer_config.json"; fs::is_regular_file(config)) {
    const json j = read_json_object(config);
    src.bos_token = token_text(j, "bos_token");
    src.eos_token = token_text(j, "eos_token");
  }
  return src;
}

ChatTemplateSource load_chat_template_source(const fs::path& model_dir, bool want_tools) {
  if (auto src = find_chat_template_source(model_dir, want_tools)) return std::move(*src);
  throw Error("no chat template in " + model_dir.string() +
              " (none of chat_template.jinja, chat_template.json, or chat_template in tokenizer_config.json)");
}

}  // namespace keel::chat
