#include "keel/chat/gguf_template.h"

#include <string_view>

#include "keel/util/error.h"

namespace keel::chat {
namespace {

constexpr std::string_view kTemplateKey = "tokenizer.chat_template";

[[noreturn]] void fail(const std::string& label, std::string_view key, const std::string& problem) {
  throw Error(label + ": key '" + std::string(key) + "': " + problem);
}

std::optional<std::string> template_text(const gguf::Header& h, const std::string& label, std::string_view key) {
  const gguf::Value* v = h.find(key);
  if (!v) return std::nullopt;
  if (v->type != gguf::ValueType::STRING)
    fail(label, key, "is a " + std::string(gguf::value_type_name(v->type)) + ", expected a string (a Jinja template)");
  return v->text;
}

// The text of the token a *_token_id key names; "" when the key is absent.
std::string token_text(const gguf::Header& h, const std::string& label, std::string_view key) {
  const gguf::Value* v = h.find(key);
  if (!v) return "";
  if (!v->is_integer() || v->type == gguf::ValueType::BOOL)
    fail(label, key, "is a " + std::string(gguf::value_type_name(v->type)) + ", expected an integer");
  const gguf::Value* tokens = h.find("tokenizer.ggml.tokens");
  if (!tokens || tokens->type != gguf::ValueType::ARRAY || tokens->element_type != gguf::ValueType::STRING)
    fail(label, key, "names a token, but tokenizer.ggml.tokens is missing or not an array of strings");
  if (v->integer < 0 || static_cast<uint64_t>(v->integer) >= tokens->texts.size())
    fail(label, key, std::to_string(v->integer) + " is outside the vocabulary (" + std::to_string(tokens->texts.size()) +
                         " tokens)");
  return tokens->texts[static_cast<size_t>(v->integer)];
}

}  // namespace

std::optional<ChatTemplateText> find_gguf_chat_template(const gguf::Header& h, const std::string& label, bool want_tools) {
  const std::string tool_key = std::string(kTemplateKey) + ".tool_use";
  if (want_tools)
    if (auto t = template_text(h, label, tool_key)) return ChatTemplateText{std::move(*t), label + " (" + tool_key + ")"};
  if (auto t = template_text(h, label, kTemplateKey))
    return ChatTemplateText{std::move(*t), label + " (" + std::string(kTemplateKey) + ")"};
  // Only named variants: the first by name, as a folder's list without a "default" gives its first.
  const std::string prefix = std::string(kTemplateKey) + ".";
  for (auto it = h.metadata.lower_bound(prefix); it != h.metadata.end() && it->first.starts_with(prefix); ++it)
    if (auto t = template_text(h, label, it->first)) return ChatTemplateText{std::move(*t), label + " (" + it->first + ")"};
  return std::nullopt;
}

std::optional<ChatTemplateSource> find_gguf_chat_template_source(const gguf::Header& h, const std::string& label,
                                                                 bool want_tools) {
  auto t = find_gguf_chat_template(h, label, want_tools);
  if (!t) return std::nullopt;
  ChatTemplateSource src;
  src.source = std::move(t->text);
  src.origin = std::move(t->origin);
  src.bos_token = token_text(h, label, "tokenizer.ggml.bos_token_id");
  src.eos_token = token_text(h, label, "tokenizer.ggml.eos_token_id");
  return src;
}

ChatTemplateSource gguf_chat_template_source(const gguf::Header& h, const std::string& label, bool want_tools) {
  if (auto src = find_gguf_chat_template_source(h, label, want_tools)) return std::move(*src);
  throw Error(label + ": no chat template (no key 'tokenizer.chat_template' or 'tokenizer.chat_template.NAME')");
}

ChatTemplateSource gguf_chat_template_source(const gguf::File& file, bool want_tools) {
  return gguf_chat_template_source(file.header(), file.path().string(), want_tools);
}

}  // namespace keel::chat
