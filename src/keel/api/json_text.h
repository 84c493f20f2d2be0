#pragma once
// JSON text for the wire. Model output is streamed token by token and a token boundary can split a
// UTF-8 sequence, so serialization replaces invalid bytes with U+FFFD instead of throwing; non-ASCII
// text is written as UTF-8, not \u escapes, as the reference APIs do.
//
// Threads: pure functions of their arguments; any HTTP thread, many at once.
#include <string>

#include <nlohmann/json.hpp>

namespace keel::api {

std::string to_json_text(const nlohmann::ordered_json& value);

}  // namespace keel::api
