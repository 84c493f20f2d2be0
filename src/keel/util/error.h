#pragma once
// The exceptions keel throws, by what the caller should do about them. Any thread may throw or
// catch them; they hold only their message.
//
// keel::Error is a failure of what keel was given (bad model file, bad flag, bad request): the
// message names the offending file, tensor or field, and the fix is on the caller's side. Callers
// at the edge (CLI, HTTP) catch it and print/answer it; nothing inside keel aborts on bad input.
// Two subclasses say the fault is elsewhere, so the HTTP edge can answer each truthfully
// (keel/api/api_error.h, to_api_error):
//   CapacityError: the input was fine, but the server is out of a resource right now (the KV pool
//     is full of live sequences): the same request may succeed later. HTTP 529/503, Retry-After.
//   InternalError: keel broke one of its own invariants; a bug to report, never the client's doing.
//     HTTP 500.
#include <stdexcept>
#include <string>

namespace keel {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

class CapacityError : public Error {
 public:
  explicit CapacityError(const std::string& message) : Error(message) {}
};

class InternalError : public Error {
 public:
  explicit InternalError(const std::string& message) : Error(message) {}
};

}  // namespace keel
