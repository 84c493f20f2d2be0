#pragma once
// The text side of a model, wherever it is kept: a Hugging Face folder's tokenizer.json and chat
// template files, or a GGUF model's tokenizer.ggml.* and tokenizer.chat_template metadata. Every
// command that tokenizes or renders (serve, run, render, tokenize, eval) asks here, so a lone
// .gguf works wherever a folder does. Plain functions; safe on any thread.
#include <filesystem>
#include <optional>
#include <vector>

#include "keel/chat/template_files.h"
#include "keel/text/tokenizer.h"

namespace keel {

// `model` is a model folder, a .gguf file, or a folder holding one GGUF model (what --model
// takes). nullopt when the model has no tokenizer (a folder without tokenizer.json).
std::optional<text::Tokenizer> find_model_tokenizer(const std::filesystem::path& model);
// Throws keel::Error naming the model when it has none.
text::Tokenizer load_model_tokenizer(const std::filesystem::path& model);

// The ids among a model's `rows` output rows that no token of `tokenizer` has: rows past its
// vocabulary (Qwen2.5 pads 151,665 tokens to 151,936 rows; a random or barely trained row can
// still win) and holes between its ids. They are never sampled (mask_logits).
std::vector<int32_t> ids_without_token(const text::Tokenizer& tokenizer, int64_t rows);

// The chat template and its bos/eos texts (chat::load_chat_template_source for folders). Throws
// keel::Error when the model has none.
chat::ChatTemplateSource load_model_chat_template(const std::filesystem::path& model, bool want_tools);

}  // namespace keel
