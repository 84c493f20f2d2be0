#include "keel/engine/model_text.h"

#include "keel/text/gguf_tokenizer.h"
#include "keel/util/error.h"

namespace keel {

std::optional<text::Tokenizer> find_model_tokenizer(const arch::ModelSource& model) {
  if (model.is_gguf()) return text::load_gguf_tokenizer(*model.files.gguf.front()).tokenizer;
  if (!std::filesystem::exists(model.files.path / "tokenizer.json")) return std::nullopt;
  return text::Tokenizer::from_file(model.files.path);
}

text::Tokenizer load_model_tokenizer(const arch::ModelSource& model) {
  if (auto t = find_model_tokenizer(model)) return *t;
  throw Error(model.files.path.string() + ": no tokenizer.json; keel needs the model's tokenizer");
}

std::vector<int32_t> ids_without_token(const text::Tokenizer& tokenizer, int64_t rows) {
  std::vector<int32_t> ids;
  for (int64_t id = 0; id < rows; ++id)
    if (static_cast<size_t>(id) >= tokenizer.vocab_size() || tokenizer.token_text(static_cast<int32_t>(id)).empty())
      ids.push_back(static_cast<int32_t>(id));
  return ids;
}

}  // namespace keel
