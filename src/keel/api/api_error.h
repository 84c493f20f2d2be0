#pragma once
// A failure the client is told about, in the envelope of the protocol it spoke. The status and the
// Anthropic error type travel together so that every layer (request parsing, model lookup, queue)
// raises one kind of exception and the HTTP edge only has to pick the envelope.
#include <string>

#include "keel/util/error.h"

namespace keel::api {

enum class Protocol { Anthropic, OpenAI };

struct ApiError : keel::Error {
  // `type` is the Anthropic error type: invalid_request_error (400), authentication_error (401),
  // permission_error (403), not_found_error (404), request_too_large (413), rate_limit_error (429),
  // api_error (500), overloaded_error (529). OpenAI bodies derive their own type from it.
  ApiError(int status, std::string type, std::string message);
  int status;
  std::string type;
};

// The common cases, so call sites cannot pair a status with the wrong type.
ApiError invalid_request(std::string message);     // 400
ApiError authentication_failed(std::string message);  // 401
ApiError not_found(std::string message);           // 404
ApiError request_too_large(std::string message);   // 413
ApiError overloaded(std::string message);          // 529 (OpenAI: 503)
ApiError internal_error(std::string message);      // 500

// Anthropic: {"type":"error","error":{"type":...,"message":...}}
// OpenAI:    {"error":{"message":...,"type":...,"param":null,"code":...}}
// OpenAI types: 4xx -> "invalid_request_error" (429 -> "rate_limit_error"), 5xx -> "server_error";
// code is "invalid_api_key" for 401, "rate_limit_exceeded" for 429, else null.
std::string error_body(Protocol protocol, const ApiError& error);
// The HTTP status to answer with: OpenAI has no 529, so overloaded becomes 503 there.
int error_status(Protocol protocol, const ApiError& error);

}  // namespace keel::api
