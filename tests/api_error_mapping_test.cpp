// How exceptions that reach the HTTP edge become answers: keel::Error's subclasses say whose fault
// it was (the client's, the server's momentary capacity, or keel's own), and each maps to its
// status, error type and Retry-After in both protocols.
#include <gtest/gtest.h>

#include <stdexcept>

#include "keel/api/api_error.h"
#include "keel/util/error.h"

namespace {

using namespace keel::api;

TEST(ApiErrorMapping, CapacityIsOverloadedWithRetryAfter) {
  const ApiError e = to_api_error(keel::CapacityError("KV pool exhausted: 32768 more bytes needed"), PlainError::BadRequest);
  EXPECT_EQ(e.status, 529);
  EXPECT_EQ(e.type, "overloaded_error");
  EXPECT_STREQ(e.what(), "KV pool exhausted: 32768 more bytes needed");
  EXPECT_EQ(e.retry_after_seconds, kOverloadedRetryAfterSeconds);
  EXPECT_GT(e.retry_after_seconds, 0);
  EXPECT_EQ(error_status(Protocol::Anthropic, e), 529);
  EXPECT_EQ(error_status(Protocol::OpenAI, e), 503);
  // OpenAI's own overloaded answer: 503 with type server_error; both SDKs retry it.
  EXPECT_EQ(error_body(Protocol::OpenAI, e),
            R"({"error":{"message":"KV pool exhausted: 32768 more bytes needed","type":"server_error","param":null,"code":null}})");
  EXPECT_EQ(error_body(Protocol::Anthropic, e),
            R"({"type":"error","error":{"type":"overloaded_error","message":"KV pool exhausted: 32768 more bytes needed"}})");
}

TEST(ApiErrorMapping, InternalIsA500WhereverItIsCaught) {
  for (PlainError plain : {PlainError::BadRequest, PlainError::ServerFault}) {
    const ApiError e = to_api_error(keel::InternalError("KV block quantized out of order"), plain);
    EXPECT_EQ(e.status, 500);
    EXPECT_EQ(e.type, "api_error");
    EXPECT_EQ(e.retry_after_seconds, 0);
    EXPECT_EQ(error_status(Protocol::OpenAI, e), 500);
  }
  // Not a keel::Error at all (a std::bad_alloc, a library's exception): keel's failure too.
  const ApiError other = to_api_error(std::runtime_error("vector::_M_range_check"), PlainError::BadRequest);
  EXPECT_EQ(other.status, 500);
  EXPECT_EQ(other.type, "api_error");
}

TEST(ApiErrorMapping, PlainErrorIsTheClientsOnlyWhileTheRequestIsRead) {
  const ApiError read = to_api_error(keel::Error("messages.0.role: unknown role"), PlainError::BadRequest);
  EXPECT_EQ(read.status, 400);
  EXPECT_EQ(read.type, "invalid_request_error");
  EXPECT_STREQ(read.what(), "messages.0.role: unknown role");
  const ApiError running = to_api_error(keel::Error("context full"), PlainError::ServerFault);
  EXPECT_EQ(running.status, 500);
  EXPECT_EQ(running.type, "api_error");
}

TEST(ApiErrorMapping, AnApiErrorKeepsItsStatusTypeAndCode) {
  const ApiError e = to_api_error(prompt_too_long(100, 64), PlainError::ServerFault);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_EQ(e.code, "context_length_exceeded");
  EXPECT_STREQ(e.what(), "prompt is too long: 100 tokens > 63 maximum");
  const ApiError queue_full = to_api_error(overloaded("queue full"), PlainError::BadRequest);
  EXPECT_EQ(queue_full.status, 529);
  EXPECT_EQ(queue_full.retry_after_seconds, kOverloadedRetryAfterSeconds);
  EXPECT_EQ(to_api_error(not_found("no route"), PlainError::BadRequest).retry_after_seconds, 0);
}

TEST(ApiErrorMapping, TypedErrorsAreStillKeelErrors) {
  // Edges that only know keel::Error (the CLI) still catch and print them.
  try {
    throw keel::CapacityError("full");
  } catch (const keel::Error& e) {
    EXPECT_STREQ(e.what(), "full");
  }
  try {
    throw keel::InternalError("bug");
  } catch (const keel::Error& e) {
    EXPECT_STREQ(e.what(), "bug");
  }
}

}  // namespace
