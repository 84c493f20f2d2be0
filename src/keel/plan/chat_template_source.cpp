#include "keel/plan/chat_template_source.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "keel/util/error.h"

namespace keel::plan {
namespace fs = std::filesystem;
namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot read");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The chat_template field: a string, or [{"name": ..., "template": ...}, ...].
std::optional<ChatTemplateText> template_from_json(const fs::path& path) {
  nlohmann::json j = nlohmann::json::parse(read_file(path), nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error(path.string() + ": not valid JSON");
  auto it = j.find("chat_template");
  if (it == j.end() || it->is_null()) return std::nullopt;
  const std::string file = path.filename().string();
  if (it->is_string()) return ChatTemplateText{it->get<std::string>(), file};
  if (!it->is_array()) throw Error(path.string() + ": chat_template must be a string or a list of named templates");
  std::optional<ChatTemplateText> chosen;
  for (const auto& entry : *it) {
    if (!entry.is_object() || !entry.contains("template") || !entry["template"].is_string()) continue;
    const std::string name = entry.value("name", std::string("default"));
    if (name == "tool_use") return ChatTemplateText{entry["template"].get<std::string>(), file + " (tool_use)"};
    if (!chosen || name == "default") chosen = ChatTemplateText{entry["template"].get<std::string>(), file + " (" + name + ")"};
  }
  return chosen;
}

}  // namespace

std::optional<ChatTemplateText> find_chat_template(const fs::path& dir) {
  if (fs::is_regular_file(dir / "chat_template.jinja")) {
    return ChatTemplateText{read_file(dir / "chat_template.jinja"), "chat_template.jinja"};
  }
  for (const char* name : {"chat_template.json", "tokenizer_config.json"}) {
    if (!fs::is_regular_file(dir / name)) continue;
    if (auto t = template_from_json(dir / name)) return t;
  }
  return std::nullopt;
}

ChatTemplateText read_chat_template_file(const fs::path& file) {
  if (file.extension() == ".json") {
    auto t = template_from_json(file);
    if (!t) throw Error(file.string() + ": missing key 'chat_template'");
    t->source = file.string();
    return *t;
  }
  return {read_file(file), file.string()};
}

}  // namespace keel::plan
