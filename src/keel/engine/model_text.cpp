#include "keel/engine/model_text.h"

#include "keel/chat/gguf_template.h"
#include "keel/model/gguf_file.h"
#include "keel/text/gguf_tokenizer.h"
#include "keel/util/error.h"

namespace keel {

std::optional<text::Tokenizer> find_model_tokenizer(const std::filesystem::path& model) {
  if (auto gguf = gguf::find_gguf_model(model)) return text::load_gguf_tokenizer(gguf::File(*gguf)).tokenizer;
  if (std::filesystem::is_directory(model) && !std::filesystem::exists(model / "tokenizer.json")) return std::nullopt;
  return text::Tokenizer::from_file(model);
}

text::Tokenizer load_model_tokenizer(const std::filesystem::path& model) {
  if (auto t = find_model_tokenizer(model)) return *t;
  throw Error(model.string() + ": no tokenizer.json; keel needs the model's tokenizer");
}

std::vector<int32_t> ids_without_token(const text::Tokenizer& tokenizer, int64_t rows) {
  std::vector<int32_t> ids;
  for (int64_t id = 0; id < rows; ++id)
    if (static_cast<size_t>(id) >= tokenizer.vocab_size() || tokenizer.token_text(static_cast<int32_t>(id)).empty())
      ids.push_back(static_cast<int32_t>(id));
  return ids;
}

chat::ChatTemplateSource load_model_chat_template(const std::filesystem::path& model, bool want_tools) {
  if (auto gguf = gguf::find_gguf_model(model)) return chat::gguf_chat_template_source(gguf::File(*gguf), want_tools);
  return chat::load_chat_template_source(model, want_tools);
}

}  // namespace keel
