#pragma once
// A GGUF file's chat template, as template_files.h finds a model folder's: tokenizer.chat_template,
// or one of the named variants tokenizer.chat_template.NAME that llama.cpp's converter writes for
// a tokenizer_config.json list of named templates ("tool_use" when tools are wanted). The bos and
// eos token texts are the tokens tokenizer.ggml.bos_token_id / eos_token_id name, since GGUF keeps
// ids, not texts. Plain functions of read-only data; safe on any thread.
#include <optional>
#include <string>

#include "keel/chat/template_files.h"
#include "keel/model/gguf_file.h"

namespace keel::chat {

// nullopt when the header has no chat template. `origin` is "LABEL (tokenizer.chat_template)" or
// "LABEL (tokenizer.chat_template.tool_use)". Throws keel::Error naming the key of a template that
// is not a string.
std::optional<ChatTemplateText> find_gguf_chat_template(const gguf::Header& header, const std::string& label,
                                                        bool want_tools = true);

// The template and its bos/eos texts; nullopt when the file has no template. Throws keel::Error
// when a token id key is not an integer inside tokenizer.ggml.tokens (naming the key).
std::optional<ChatTemplateSource> find_gguf_chat_template_source(const gguf::Header& header, const std::string& label,
                                                                 bool want_tools);
// The same; throws keel::Error when the file has no template.
ChatTemplateSource gguf_chat_template_source(const gguf::Header& header, const std::string& label, bool want_tools = false);
ChatTemplateSource gguf_chat_template_source(const gguf::File& file, bool want_tools = false);

}  // namespace keel::chat
