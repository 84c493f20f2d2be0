#include "keel/api/api_error.h"

#include <utility>

#include "keel/api/json_text.h"

namespace keel::api {

ApiError::ApiError(int status_code, std::string error_type, std::string message)
    : keel::Error(message), status(status_code), type(std::move(error_type)) {}

ApiError invalid_request(std::string message) { return {400, "invalid_request_error", std::move(message)}; }
ApiError authentication_failed(std::string message) { return {401, "authentication_error", std::move(message)}; }
ApiError permission_denied(std::string message) { return {403, "permission_error", std::move(message)}; }
ApiError not_found(std::string message) { return {404, "not_found_error", std::move(message)}; }
ApiError model_not_found(std::string message) {
  ApiError e(404, "not_found_error", std::move(message));
  e.code = "model_not_found";
  return e;
}
ApiError request_too_large(std::string message) { return {413, "request_too_large", std::move(message)}; }
ApiError unsupported_media_type(std::string message) { return {415, "invalid_request_error", std::move(message)}; }
ApiError overloaded(std::string message) {
  ApiError e(529, "overloaded_error", std::move(message));
  e.retry_after_seconds = kOverloadedRetryAfterSeconds;
  return e;
}
ApiError internal_error(std::string message) { return {500, "api_error", std::move(message)}; }
ApiError prompt_too_long(int64_t prompt_tokens, int64_t context_tokens) {
  ApiError e(400, "invalid_request_error",
             "prompt is too long: " + std::to_string(prompt_tokens) + " tokens > " +
                 std::to_string(context_tokens - 1) + " maximum");
  e.code = "context_length_exceeded";
  return e;
}

ApiError to_api_error(const std::exception& e, PlainError plain) {
  // Most specific first: ApiError, CapacityError and InternalError are all keel::Errors.
  if (const auto* api = dynamic_cast<const ApiError*>(&e)) return *api;
  if (dynamic_cast<const CapacityError*>(&e)) return overloaded(e.what());
  if (dynamic_cast<const InternalError*>(&e)) return internal_error(e.what());
  if (dynamic_cast<const Error*>(&e) && plain == PlainError::BadRequest) return invalid_request(e.what());
  return internal_error(e.what());
}

namespace {

const char* openai_type(int status) {
  if (status == 429) return "rate_limit_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

nlohmann::ordered_json openai_code(const ApiError& error) {
  if (!error.code.empty()) return error.code;
  if (error.status == 401) return "invalid_api_key";
  if (error.status == 429) return "rate_limit_exceeded";
  return nullptr;
}

}  // namespace

std::string error_body(Protocol protocol, const ApiError& error) {
  nlohmann::ordered_json body;
  if (protocol == Protocol::Anthropic) {
    body["type"] = "error";
    body["error"]["type"] = error.type;
    body["error"]["message"] = error.what();
  } else {
    auto& e = body["error"];
    e["message"] = error.what();
    e["type"] = openai_type(error_status(protocol, error));
    e["param"] = error.param.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(error.param);
    e["code"] = openai_code(error);
  }
  return to_json_text(body);
}

std::string shared_error_body(const ApiError& error) {
  nlohmann::ordered_json body;
  body["type"] = "error";
  body["error"]["type"] = error.type;
  body["error"]["message"] = error.what();
  body["error"]["param"] = error.param.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(error.param);
  body["error"]["code"] = openai_code(error);
  return to_json_text(body);
}

int error_status(Protocol protocol, const ApiError& error) {
  if (protocol != Protocol::Anthropic && error.status == 529) return 503;
  return error.status;
}

}  // namespace keel::api
