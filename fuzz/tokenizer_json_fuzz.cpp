// Fuzz target: loading a tokenizer.json must reject any malformed file with keel::Error and never
// crash or hang; a file that loads must encode, decode and stream-decode without failing.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "keel/text/stream_decoder.h"
#include "keel/text/tokenizer.h"
#include "keel/util/error.h"

namespace {

void exercise(const keel::text::Tokenizer& tok, std::string_view sample) {
  for (bool parse_special : {true, false}) {
    auto ids = tok.encode(sample, parse_special);
    (void)tok.decode(ids);
    keel::text::StreamDecoder stream(tok);
    for (int32_t id : ids) (void)stream.feed(id);
    (void)stream.flush();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  try {
    auto tok = keel::text::Tokenizer::from_json_text(input, "fuzz");
    exercise(tok, "Hello world! <|im_start|>user\n  héllo 12345 🦙\t\r\n<tool_call>");
    // The input's own bytes make an arbitrary (often invalid UTF-8) sample text.
    exercise(tok, input.substr(0, 64));
    if (tok.vocab_size() > 0) (void)tok.token_text(static_cast<int32_t>(tok.vocab_size() - 1));
  } catch (const keel::Error&) {
  }
  return 0;
}
