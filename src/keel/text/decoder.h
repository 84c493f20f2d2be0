#pragma once
// tokenizer.json decoders, turned into a token-at-a-time byte producer so that batch decoding and
// streaming share one code path. Supported: ByteLevel, Replace, ByteFallback, Fuse, Strip,
// Metaspace, Sequence.
//
// Hugging Face applies decoders to the whole token list. Every supported step but Strip acts on
// each token by itself, and Strip is only used after Fuse, where it trims the start of the whole
// text: that is kept as a little state (how many leading characters may still be stripped).
// Strip's `stop` (trimming the end) cannot be honoured while streaming and is ignored.
//
// Threads: a Decoder is immutable after from_json(); decode_token() is const and may run on many threads
// at once, each pass with its own State (owned by the caller, one per token sequence).
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "keel/text/json_fields.h"

namespace keel::text {

class Decoder {
 public:
  struct Step;
  // The state of one decoding pass over a token sequence.
  struct State {
    bool first_token = true;
    size_t leading_stripped = 0;  // characters removed so far by a post-Fuse Strip
    bool past_start = false;      // a character survived, so no more leading stripping
  };

  // `config` may be null: tokens are then concatenated as they are.
  static Decoder from_json(const json_fields::Json* config, const std::string& where);
  Decoder();
  ~Decoder();
  Decoder(Decoder&&) noexcept;
  Decoder& operator=(Decoder&&) noexcept;

  // The bytes that `token` (vocabulary text) adds to the output. Not necessarily valid UTF-8:
  // a character may be spread over several byte tokens.
  std::string decode_token(std::string_view token, State& state) const;

 private:
  std::vector<std::unique_ptr<Step>> per_token_;
  char32_t strip_char_ = 0;
  size_t strip_start_ = 0;  // leading `strip_char_`s removed from the whole output
};

}  // namespace keel::text
