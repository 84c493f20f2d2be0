#include "keel/api/sse_writer.h"

#include "keel/api/anthropic_stream.h"
#include "keel/api/openai_stream.h"
#include "keel/api/responses_response.h"
#include "keel/api/responses_stream.h"

namespace keel::api {

std::unique_ptr<StreamWriter> make_stream_writer(const ChatRequest& request, int64_t created_unix) {
  switch (request.protocol) {
    case Protocol::Anthropic: return std::make_unique<AnthropicStreamWriter>();
    case Protocol::OpenAI: return std::make_unique<OpenAIStreamWriter>(request.include_usage, created_unix);
    case Protocol::Responses:
      return std::make_unique<ResponsesStreamWriter>(responses_settings(request), created_unix);
  }
  return nullptr;
}

}  // namespace keel::api
