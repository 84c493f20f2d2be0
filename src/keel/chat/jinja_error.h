#pragma once
// Template errors are keel::Error whose message starts with the Python exception name jinja2
// would raise (TemplateSyntaxError, UndefinedError, TypeError, SecurityError...), so a message
// from keel reads like the one users already know from transformers.
// Stateless: any thread.
#include <string>

#include "keel/util/error.h"

namespace keel::jinja {

[[noreturn]] inline void fail(const std::string& kind, const std::string& message) {
  throw keel::Error(kind + ": " + message);
}

}  // namespace keel::jinja
