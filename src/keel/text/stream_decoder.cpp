#include "keel/text/stream_decoder.h"

#include "keel/util/utf8.h"

namespace keel::text {

StreamDecoder::StreamDecoder(Tokenizer tokenizer, bool skip_special)
    : tokenizer_(std::move(tokenizer)), skip_special_(skip_special) {}

std::string StreamDecoder::feed(int32_t id) {
  if (skip_special_ && tokenizer_.is_special(id)) return {};
  pending_ += tokenizer_.decode_token_bytes(id, state_);
  size_t complete = utf8::complete_prefix_length(pending_);
  std::string out = utf8::sanitize(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = utf8::sanitize(pending_);
  pending_.clear();
  state_ = Decoder::State();
  return out;
}

}  // namespace keel::text
