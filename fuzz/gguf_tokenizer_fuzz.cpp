// Fuzz target: a GGUF's tokenizer metadata and chat template must be refused with keel::Error
// when broken and never crash or hang; a tokenizer that loads must encode, decode and
// stream-decode without failing.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "keel/chat/gguf_template.h"
#include "keel/model/gguf_file.h"
#include "keel/text/gguf_tokenizer.h"
#include "keel/text/stream_decoder.h"
#include "keel/util/error.h"

namespace {

void exercise(const keel::text::Tokenizer& tok, std::string_view sample) {
  for (bool parse_special : {true, false}) {
    auto ids = tok.encode(sample, parse_special);
    (void)tok.decode(ids);
    (void)tok.decode(ids, /*skip_special=*/true);
    keel::text::StreamDecoder stream(tok);
    for (int32_t id : ids) (void)stream.feed(id);
    (void)stream.flush();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  keel::gguf::Header header;
  try {
    header = keel::gguf::parse_header(bytes, "fuzz");
  } catch (const keel::Error&) {
    return 0;
  }
  try {
    const auto g = keel::text::load_gguf_tokenizer(header, "fuzz");
    exercise(g.tokenizer, "Hello world! <|im_start|>user\n  héllo 12345 🦙\t\r\n<tool_call> ab abc <s>x</s>");
    exercise(g.tokenizer, std::string_view(reinterpret_cast<const char*>(data), size).substr(size / 2, 64));
    for (size_t id = 0; id < g.tokenizer.vocab_size() && id < 512; ++id) (void)g.tokenizer.token_text(static_cast<int32_t>(id));
  } catch (const keel::Error&) {
  }
  try {
    (void)keel::chat::gguf_chat_template_source(header, "fuzz", /*want_tools=*/true);
  } catch (const keel::Error&) {
  }
  return 0;
}
