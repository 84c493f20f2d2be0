// Fuzz target: any bytes given to the OpenAI request parser become a ChatRequest or an ApiError
// (400, invalid_request_error), never a crash, a hang or another exception type. An accepted
// request must also survive what the server does next: serializing its messages and tools.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "keel/api/chat_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  keel::api::RequestLimits limits;
  limits.max_json_depth = 32;
  try {
    auto request = keel::api::parse_openai_request(body, limits);
    (void)request.messages.dump();
    (void)request.tools.dump();
    if (request.messages.empty() || request.max_tokens < 1 || request.max_tokens > limits.max_tokens_cap) std::abort();
  } catch (const keel::api::ApiError& e) {
    if (e.status != 400) std::abort();
  }
  return 0;
}
