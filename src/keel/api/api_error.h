#pragma once
// A failure the client is told about, in the envelope of the protocol it spoke. The status and the
// Anthropic error type travel together so that every layer (request parsing, model lookup, queue)
// raises one kind of exception and the HTTP edge only has to pick the envelope. Pure values and
// functions: any thread may call them.
#include <cstdint>
#include <exception>
#include <string>

#include "keel/util/error.h"

namespace keel::api {

// OpenAI is Chat Completions; Responses is OpenAI's Responses API (same error envelope as OpenAI).
enum class Protocol { Anthropic, OpenAI, Responses };

struct ApiError : keel::Error {
  // `type` is the Anthropic error type: invalid_request_error (400), authentication_error (401),
  // permission_error (403), not_found_error (404), request_too_large (413), rate_limit_error (429),
  // api_error (500), overloaded_error (529). OpenAI bodies derive their own type from it.
  ApiError(int status, std::string type, std::string message);
  int status;
  std::string type;
  std::string code;  // OpenAI's machine-readable `code` ("context_length_exceeded", ...); empty: derived from status
  std::string param;  // the request field at fault ("messages.3.content"), OpenAI's `param`; empty: null
  // Seconds after which the same request may succeed (a Retry-After header, which both SDKs honor
  // when they retry); 0: no header.
  int retry_after_seconds = 0;
};

// The common cases, so call sites cannot pair a status with the wrong type.
ApiError invalid_request(std::string message);     // 400
ApiError authentication_failed(std::string message);  // 401
ApiError permission_denied(std::string message);   // 403 permission_error
ApiError not_found(std::string message);           // 404
ApiError model_not_found(std::string message);     // 404 not_found_error, OpenAI code "model_not_found"
ApiError request_too_large(std::string message);   // 413
ApiError unsupported_media_type(std::string message);  // 415 invalid_request_error
ApiError overloaded(std::string message);          // 529 (OpenAI: 503), Retry-After kOverloadedRetryAfterSeconds
ApiError internal_error(std::string message);      // 500
// The prompt leaves no room to generate: 400 with the wording Claude Code compacts on
// ("prompt is too long: N tokens > M maximum"), OpenAI code context_length_exceeded.
ApiError prompt_too_long(int64_t prompt_tokens, int64_t context_tokens);

// Long enough for the running request to move on, short enough that a client's retry is not idle.
constexpr int kOverloadedRetryAfterSeconds = 2;

// How the edge answers a plain keel::Error (one that is neither a CapacityError nor an
// InternalError): it is about what keel was given, and who gave it depends on where it was caught.
enum class PlainError {
  BadRequest,   // while the request is read, resolved and rendered: the client's input, 400
  ServerFault,  // once the engine runs a request keel accepted, or a handler let it escape: 500
};
// The answer for an exception that reached the HTTP edge: an ApiError as it is; a CapacityError as
// overloaded (529, OpenAI 503, Retry-After: the same request may succeed later); an InternalError,
// or anything that is not a keel::Error, as internal_error (500); a plain keel::Error as `plain`
// says. The message is the exception's own.
ApiError to_api_error(const std::exception& e, PlainError plain);

// Anthropic: {"type":"error","error":{"type":...,"message":...}}
// OpenAI (and Responses): {"error":{"message":...,"type":...,"param":...,"code":...}}, param the
// field at fault or null
// OpenAI types: 4xx -> "invalid_request_error" (429 -> "rate_limit_error"), 5xx -> "server_error";
// code is error.code when set, else "invalid_api_key" for 401, "rate_limit_exceeded" for 429, else null.
std::string error_body(Protocol protocol, const ApiError& error);
// For routes both SDKs call (/v1/models): Anthropic's envelope whose error object also carries
// OpenAI's "param" and "code", so either SDK finds what it reads.
std::string shared_error_body(const ApiError& error);
// The HTTP status to answer with: OpenAI has no 529, so overloaded becomes 503 on its routes.
int error_status(Protocol protocol, const ApiError& error);

}  // namespace keel::api
