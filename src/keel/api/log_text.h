#pragma once
// The one way client-supplied text (a path, a method, a header, a model name, an error message
// that quotes the request) reaches keel serve's log. A raw newline would forge a log line and an
// escape sequence would drive the operator's terminal, so only printable ASCII passes as is.
// Pure function: any thread.
#include <cstddef>
#include <string>
#include <string_view>

namespace keel::api {

// `text` on one line: printable ASCII kept, a backslash doubled, every other byte (controls, DEL,
// any byte of a non-ASCII character) written as \xNN; at most `limit` input bytes, then "...".
std::string log_safe(std::string_view text, size_t limit = 200);

}  // namespace keel::api
