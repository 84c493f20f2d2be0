#pragma once
// Typed access to tokenizer.json fields. Every failure is a keel::Error naming the file label and
// the JSON path of the field ("tokenizer.json: model.merges[3]: expected a string"), so a broken
// file is reported precisely instead of surfacing as a generic JSON exception.
// Pure functions of their arguments: any thread, while nobody modifies the Json they read. The references
// and pointers they return point into the caller's Json and live as long as it does.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace keel::text::json_fields {

using Json = nlohmann::json;

// Deeper nesting than this (Sequence inside Sequence...) is rejected: real files use two levels,
// and the limit keeps recursion bounded for hostile input.
constexpr int kMaxNesting = 16;

[[noreturn]] void fail(const std::string& where, const std::string& what);

const Json& require_object(const Json& value, const std::string& where);
const Json& require_array(const Json& value, const std::string& where);

// The member `key` of object `obj`; missing or null counts as absent for the optional forms.
const Json* find(const Json& obj, const char* key);
const Json& require(const Json& obj, const char* key, const std::string& where);

std::string require_string(const Json& obj, const char* key, const std::string& where);
std::optional<std::string> optional_string(const Json& obj, const char* key, const std::string& where);
bool optional_bool(const Json& obj, const char* key, bool fallback, const std::string& where);
int64_t optional_int(const Json& obj, const char* key, int64_t fallback, const std::string& where);

std::string as_string(const Json& value, const std::string& where);
int64_t as_int(const Json& value, const std::string& where);

// A string holding exactly one code point (Metaspace's replacement, Strip's content).
char32_t single_char(const Json& obj, const char* key, const std::string& where);

}  // namespace keel::text::json_fields
