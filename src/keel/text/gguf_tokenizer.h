#pragma once
// A Tokenizer from a GGUF file's tokenizer metadata (tokenizer.ggml.*), and the reverse: the
// tokenizer.ggml.* keys for a Hugging Face tokenizer.json (what `keel synth --format gguf` writes).
//
// The metadata is assembled into the tokenizer.json object Hugging Face would ship for the same
// tokenizer and built by Tokenizer::from_json, so a GGUF tokenizer runs the very code a
// tokenizer.json does and cannot drift from it:
//   - tokenizer.ggml.model "gpt2": byte-level BPE; tokens, merges ("left right"), token_type.
//     tokenizer.ggml.pre names the normalizer / pre-tokenizer / decoder of the original
//     tokenizer.json (the regexes llama.cpp copied from those files); a name keel has no recipe
//     for is refused by name, never tokenized with a guess.
//   - tokenizer.ggml.model "llama": SentencePiece BPE with byte fallback (<0xNN> tokens); tokens,
//     scores, token_type and no merges. The merges are every split of a piece into two pieces,
//     ranked by the merged piece's score (highest first; ties by merged id, then left id), as
//     Hugging Face's SentencePiece conversion ranks them; llama.cpp's SPM tokenizer merges the
//     highest-scoring adjacent pair first, which is the same order whenever the merged pieces'
//     scores differ (they do in every SentencePiece BPE model).
//   - token_type 3 (control) and 2 (unknown) become special added tokens, 4 (user-defined)
//     non-special ones, matched in text as written, exactly as tokenizer.json's added_tokens are
//     (and as llama.cpp matches those types before tokenizing).
//
// Why here (module text, which depends on model for gguf_file.h): the assembly needs to know
// tokenizer.json's shape, which is text's business, and the GGUF container reader is a leaf of
// model that depends only on util; model never depends on text, so the edge makes no cycle.
// Plain functions of read-only data; safe on any thread.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "keel/model/gguf_file.h"
#include "keel/text/tokenizer.h"

namespace keel::text {

// The ids tokenizer.ggml.*_token_id name (each checked to be inside the vocabulary) and whether
// llama.cpp would add BOS/EOS when encoding a bare prompt (tokenizer.ggml.add_bos_token, else the
// model's default: true for "llama" and for the Llama 3 pre-tokenizer). keel itself never adds
// them: the chat template writes them as text.
struct GgufSpecialTokens {
  std::optional<int32_t> bos, eos, eot, eom, unknown, padding;
  bool add_bos = false;
  bool add_eos = false;
};

struct GgufTokenizer {
  Tokenizer tokenizer;
  std::string model;  // tokenizer.ggml.model
  std::string pre;    // tokenizer.ggml.pre ("default" for "llama")
  GgufSpecialTokens special;
};

// The tokenizer.json object equivalent to the metadata of `header`. Throws keel::Error naming
// `label` and the key for missing or malformed metadata, e.g.
//   "model.gguf: key 'tokenizer.ggml.merges': entry 12 ('a bc'): 'bc' is not a token".
nlohmann::json gguf_tokenizer_json(const gguf::Header& header, const std::string& label);

// The tokenizer of a parsed header (a fuzzer's input) or of an open file.
GgufTokenizer load_gguf_tokenizer(const gguf::Header& header, const std::string& label);
GgufTokenizer load_gguf_tokenizer(const gguf::File& file);

// The tokenizer.ggml.pre names keel has a recipe for, for messages ("qwen2, llama-bpe, ...").
std::string gguf_pre_tokenizer_list();

// The reverse, for writers: the tokenizer.ggml.* values for a byte-level BPE tokenizer.json
// (the keys and value types llama.cpp's converter writes). Only the byte-level BPE layouts whose
// pre-tokenizer matches one of the recipes above can be written; anything else is refused with
// the field that does not fit, so a written GGUF always tokenizes like its tokenizer.json.
struct GgufTokenizerMetadata {
  std::string model;  // "gpt2"
  std::string pre;    // "qwen2", ...
  std::vector<std::string> tokens;
  std::vector<int32_t> token_types;
  std::vector<std::string> merges;  // "left right"
};
GgufTokenizerMetadata gguf_tokenizer_metadata(const nlohmann::json& tokenizer_json, const std::string& label);

}  // namespace keel::text
