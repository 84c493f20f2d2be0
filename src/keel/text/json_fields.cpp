#include "keel/text/json_fields.h"

#include "keel/util/utf8.h"
#include "keel/util/error.h"

namespace keel::text::json_fields {

void fail(const std::string& where, const std::string& what) { throw Error(where + ": " + what); }

const Json& require_object(const Json& value, const std::string& where) {
  if (!value.is_object()) fail(where, "expected an object");
  return value;
}

const Json& require_array(const Json& value, const std::string& where) {
  if (!value.is_array()) fail(where, "expected an array");
  return value;
}

const Json* find(const Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

const Json& require(const Json& obj, const char* key, const std::string& where) {
  require_object(obj, where);
  const Json* v = find(obj, key);
  if (!v) fail(where, std::string("missing field \"") + key + "\"");
  return *v;
}

std::string as_string(const Json& value, const std::string& where) {
  if (!value.is_string()) fail(where, "expected a string");
  return value.get<std::string>();
}

int64_t as_int(const Json& value, const std::string& where) {
  if (value.is_number_unsigned()) {
    auto v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(INT64_MAX)) fail(where, "integer out of range");
    return static_cast<int64_t>(v);
  }
  if (!value.is_number_integer()) fail(where, "expected an integer");
  return value.get<int64_t>();
}

std::string require_string(const Json& obj, const char* key, const std::string& where) {
  return as_string(require(obj, key, where), where + "." + key);
}

std::optional<std::string> optional_string(const Json& obj, const char* key, const std::string& where) {
  const Json* v = find(obj, key);
  if (!v) return std::nullopt;
  return as_string(*v, where + "." + key);
}

bool optional_bool(const Json& obj, const char* key, bool fallback, const std::string& where) {
  const Json* v = find(obj, key);
  if (!v) return fallback;
  if (!v->is_boolean()) fail(where + "." + key, "expected true or false");
  return v->get<bool>();
}

int64_t optional_int(const Json& obj, const char* key, int64_t fallback, const std::string& where) {
  const Json* v = find(obj, key);
  if (!v) return fallback;
  return as_int(*v, where + "." + key);
}

char32_t single_char(const Json& obj, const char* key, const std::string& where) {
  std::string s = require_string(obj, key, where);
  if (!utf8::is_valid(s)) fail(where + "." + key, "not valid UTF-8");
  auto cps = utf8::to_code_points(s);
  if (cps.size() != 1) fail(where + "." + key, "expected exactly one character");
  return cps[0];
}

}  // namespace keel::text::json_fields
