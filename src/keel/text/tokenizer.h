#pragma once
// A tokenizer loaded from a Hugging Face tokenizer.json (or a GGUF's tokenizer metadata, which
// gguf_tokenizer.h assembles into the same object): byte-level BPE (Qwen2/2.5/3, Llama 3, GPT-2,
// DeepSeek) and SentencePiece-style BPE with byte fallback (Llama 2, Mistral, Gemma 3).
//
// encode: cut out added tokens -> normalize -> pre-tokenize into words -> BPE per word.
// No special tokens (BOS...) are ever added; the chat template writes those as text, and encode
// matches them exactly. Copies share the loaded data and are safe to use from many threads.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "keel/text/added_tokens.h"
#include "keel/text/decoder.h"

namespace keel::text {

class Tokenizer {
 public:
  // `path` is a tokenizer.json file or a directory containing one. Throws keel::Error naming the
  // file and the offending field for anything it cannot load.
  static Tokenizer from_file(const std::filesystem::path& path);
  // `label` names the source in error messages.
  static Tokenizer from_json_text(std::string_view json_text, const std::string& label);
  // An already parsed tokenizer.json object: what a GGUF's metadata is assembled into
  // (gguf_tokenizer.h), with no text round trip.
  static Tokenizer from_json(const nlohmann::json& root, const std::string& label);

  // Token ids for `text` (invalid UTF-8 is read as U+FFFD). With `parse_special` false, special
  // added tokens written in the text are encoded as ordinary text instead of their ids.
  std::vector<int32_t> encode(std::string_view text, bool parse_special = true) const;
  // Token ids for `text`, with special added tokens matched only where `scope` allows them (see
  // SpecialTokenScope and AddedTokenMatcher::split); everywhere else they are encoded as ordinary
  // text, as with parse_special false. Non-special added tokens match everywhere, as in Hugging
  // Face. A chat prompt passes the byte ranges its template wrote itself
  // (chat::encode_rendered_prompt), so text a client wrote never becomes a control token.
  // Tokens with `normalized: true` are matched after normalization, where byte offsets no longer
  // line up with `text`: a special one matches only when the whole piece of text it is found in
  // (the text between two raw-matched added tokens) lies inside the scope.
  std::vector<int32_t> encode(std::string_view text, const SpecialTokenScope& scope) const;

  // The text of `ids`; sequences that do not form valid UTF-8 become U+FFFD. Throws keel::Error
  // for an id outside the vocabulary.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  std::optional<int32_t> token_id(std::string_view token) const;
  // The token as stored in the vocabulary (e.g. "Ġhello"), or an added token's content (in its
  // normalized form for a token matched after normalization, as Hugging Face stores it).
  const std::string& token_text(int32_t id) const;
  bool is_special(int32_t id) const;
  // One of tokenizer.json's added tokens, special or not (Qwen2.5's <tool_call> is not special).
  bool is_added(int32_t id) const;
  // One more than the largest id in the vocabulary and added tokens.
  size_t vocab_size() const;

  // The raw bytes one token contributes given the decoding state so far (used by StreamDecoder).
  std::string decode_token_bytes(int32_t id, Decoder::State& state) const;
  // The raw bytes the token writes after other tokens (no leading-space stripping of a first
  // token); may be a piece of a UTF-8 character. Throws keel::Error for an id outside the vocabulary.
  std::string token_bytes(int32_t id) const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace keel::text
