#pragma once
// keel reports every user-facing failure (bad model file, bad flag, bad request) as keel::Error with
// a message that names the offending file, tensor or field. Callers at the edge (CLI, HTTP) catch it
// and print/answer it; nothing inside keel aborts on bad input.
#include <stdexcept>
#include <string>

namespace keel {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace keel
