#pragma once
// tokenizer.json pre-tokenizers: cut normalized text into words that the model encodes one by one.
// Supported: Split, ByteLevel, Digits, Metaspace, Whitespace, WhitespaceSplit, Sequence.
// Immutable after make_pre_tokenizer(): split() is const and may run on many threads at once. The caller
// owns the returned object and the `pieces` it passes.
#include <memory>
#include <string>
#include <vector>

#include "keel/text/json_fields.h"

namespace keel::text {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their finer split (empty pieces are dropped). `at_text_start` says whether
  // the first piece begins the whole input (not after an added token): Metaspace's "first" scheme
  // only prepends there.
  virtual void split(std::vector<std::string>& pieces, bool at_text_start) const = 0;
};

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json_fields::Json& config, const std::string& where,
                                                 int depth = 0);

}  // namespace keel::text
