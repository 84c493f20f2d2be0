#pragma once
// tokenizer.json normalizers: rewrite a piece of input text before pre-tokenization.
// Supported: NFC, NFD, NFKC, NFKD, Replace, Prepend, Strip, Sequence.
// Immutable after make_normalizer(): normalize() is const and may run on many threads at once. The
// caller owns the returned object.
#include <memory>
#include <string>
#include <string_view>

#include "keel/text/json_fields.h"

namespace keel::text {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // `text` is valid UTF-8 and so is the result.
  virtual std::string normalize(std::string_view text) const = 0;
};

// Builds the normalizer described by `config` (the "normalizer" value of tokenizer.json, not null).
std::unique_ptr<Normalizer> make_normalizer(const json_fields::Json& config, const std::string& where,
                                            int depth = 0);

}  // namespace keel::text
