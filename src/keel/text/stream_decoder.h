#pragma once
// Streaming detokenization: feed generated ids one at a time and get back only text that is
// complete UTF-8. A character split over several byte tokens is held back until its last byte
// arrives, so a client never sees half a character (or a replacement char that later "fixes" itself).
// One object per stream; not thread-safe: one thread at a time uses it. It holds its own Tokenizer copy
// (sharing the loaded, immutable data), so it does not depend on the Tokenizer it was made from.
#include <cstdint>
#include <string>

#include "keel/text/tokenizer.h"

namespace keel::text {

class StreamDecoder {
 public:
  explicit StreamDecoder(Tokenizer tokenizer, bool skip_special = false);

  // The text that became complete with `id` (possibly empty).
  std::string feed(int32_t id);
  // Whatever is still held back, with an unfinished character replaced by U+FFFD. The decoder can
  // be reused afterwards for a new sequence.
  std::string flush();

 private:
  Tokenizer tokenizer_;
  bool skip_special_;
  Decoder::State state_;
  std::string pending_;  // bytes of an unfinished character
};

}  // namespace keel::text
