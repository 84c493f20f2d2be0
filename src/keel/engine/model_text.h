#pragma once
// The tokenizer of a model, wherever it is kept: a Hugging Face folder's tokenizer.json, or a GGUF
// model's tokenizer.ggml.* metadata. Every command that tokenizes (serve, run, tokenize, eval,
// bench) asks here, so a lone .gguf works wherever a folder does; the chat template is the
// ModelSource's own (arch/model_source.h). Plain functions; safe on any thread.
#include <optional>
#include <vector>

#include "keel/arch/model_source.h"
#include "keel/text/tokenizer.h"

namespace keel {

// nullopt when the model has no tokenizer (a folder without tokenizer.json).
std::optional<text::Tokenizer> find_model_tokenizer(const arch::ModelSource& model);
// Throws keel::Error naming the model when it has none.
text::Tokenizer load_model_tokenizer(const arch::ModelSource& model);

// The ids among a model's `rows` output rows that no token of `tokenizer` has: rows past its
// vocabulary (Qwen2.5 pads 151,665 tokens to 151,936 rows; a random or barely trained row can
// still win) and holes between its ids. They are never sampled (mask_logits).
std::vector<int32_t> ids_without_token(const text::Tokenizer& tokenizer, int64_t rows);

}  // namespace keel
