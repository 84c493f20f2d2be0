#pragma once
// Reading a client's JSON body: a depth check before parsing (a body of 100000 '[' must be a 400,
// not a stack overflow anywhere downstream), then typed field access that reports the failing field
// by its path ("messages.3.content.0.text: expected a string, got number").
//
// Threads: pure functions of their arguments; any HTTP thread, many at once.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "keel/api/api_error.h"

namespace keel::api {

using Json = nlohmann::ordered_json;

// Parses `body` (key order of every object kept). Throws ApiError 400 when it is not JSON, nests
// deeper than `max_depth` arrays/objects, or is not an object at the top.
Json parse_request_object(std::string_view body, int max_depth);

// Nesting depth of the arrays and objects in `text`, scanning bytes only (strings skipped), stopping
// as soon as `limit` is exceeded. Not a validator: the parser runs afterwards.
int json_nesting_depth(std::string_view text, int limit);

[[noreturn]] void reject_field(const std::string& path, const std::string& problem);

std::string json_type_name(const Json& value);
std::string join_path(const std::string& parent, std::string_view key);
std::string join_path(const std::string& parent, size_t index);

// Accessors: `path` is the object's own path ("" at the top). A missing key or an explicit null
// counts as absent for the optional forms; the required forms reject both.
const Json* find_field(const Json& object, std::string_view key);
const Json& require_field(const Json& object, std::string_view key, const std::string& path);
std::string require_string(const Json& object, std::string_view key, const std::string& path);
std::optional<std::string> optional_string(const Json& object, std::string_view key, const std::string& path);
std::optional<bool> optional_bool(const Json& object, std::string_view key, const std::string& path);
// Integers; a float with an integral value (e.g. 1024.0) is accepted.
std::optional<int64_t> optional_int(const Json& object, std::string_view key, const std::string& path);
std::optional<double> optional_number(const Json& object, std::string_view key, const std::string& path);
const Json& require_array(const Json& object, std::string_view key, const std::string& path);
const Json& require_object(const Json& object, std::string_view key, const std::string& path);

// Checks a value already in hand.
void expect_object(const Json& value, const std::string& path);
const std::string& expect_string(const Json& value, const std::string& path);

}  // namespace keel::api
