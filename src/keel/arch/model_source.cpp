#include "keel/arch/model_source.h"

#include <regex>

#include "keel/arch/gguf_model.h"
#include "keel/chat/gguf_template.h"
#include "keel/util/error.h"

namespace keel::arch {
namespace {

std::optional<chat::ChatTemplateSource> find_template(const ModelFiles& files) {
  if (!files.is_gguf()) return chat::find_chat_template_source(files.path, /*want_tools=*/true);
  const gguf::File& first = *files.gguf.front();
  return chat::find_gguf_chat_template_source(first.header(), first.path().string(), /*want_tools=*/true);
}

}  // namespace

ModelSource resolve_model(const std::filesystem::path& model) {
  ModelFiles files = find_model_files(model);
  ConfigView config = files.is_gguf() ? gguf_config(*files.gguf.front()) : ConfigView::load(files.config_json);
  std::optional<chat::ChatTemplateSource> chat_template = find_template(files);
  return ModelSource{std::move(files), std::move(config), std::move(chat_template)};
}

std::string ModelSource::name() const {
  std::string name = files.path.filename().string();
  if (!is_gguf()) return name;
  if (name.ends_with(".gguf")) name.resize(name.size() - 5);
  static const std::regex shard(R"(-\d{5}-of-\d{5}$)");
  return std::regex_replace(name, shard, "");
}

const chat::ChatTemplateSource& ModelSource::require_chat_template() const {
  if (chat_template) return *chat_template;
  throw Error(files.path.string() + ": no chat template (" +
              (is_gguf() ? "no key 'tokenizer.chat_template' or 'tokenizer.chat_template.NAME'"
                         : "none of chat_template.jinja, chat_template.json, or chat_template in tokenizer_config.json") +
              ")");
}

}  // namespace keel::arch
