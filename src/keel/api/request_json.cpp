#include "keel/api/request_json.h"

#include <cmath>
#include <limits>

namespace keel::api {

int json_nesting_depth(std::string_view text, int limit) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) {
        deepest = depth;
        if (deepest > limit) return deepest;
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

Json parse_request_object(std::string_view body, int max_depth) {
  if (json_nesting_depth(body, max_depth) > max_depth)
    throw invalid_request("request body nests arrays/objects deeper than " + std::to_string(max_depth) + " levels");
  Json value;
  try {
    value = Json::parse(body.begin(), body.end());
  } catch (const nlohmann::json::parse_error& e) {
    throw invalid_request("request body is not valid JSON (at byte " + std::to_string(e.byte) + ")");
  } catch (const nlohmann::json::exception&) {
    // out_of_range 406: a number literal beyond double range (1e999).
    throw invalid_request("request body is not valid JSON (a number is out of range)");
  }
  if (!value.is_object()) throw invalid_request("request body must be a JSON object, got " + json_type_name(value));
  return value;
}

void reject_field(const std::string& path, const std::string& problem) {
  ApiError e = invalid_request(path.empty() ? problem : path + ": " + problem);
  e.param = path;
  throw e;
}

std::string json_type_name(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::object: return "object";
    case Json::value_t::array: return "array";
    case Json::value_t::string: return "string";
    case Json::value_t::boolean: return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float: return "number";
    default: return "unknown";
  }
}

std::string join_path(const std::string& parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  return parent + "." + std::string(key);
}

std::string join_path(const std::string& parent, size_t index) { return join_path(parent, std::to_string(index)); }

namespace {

[[noreturn]] void reject_type(const std::string& path, const char* expected, const Json& got) {
  reject_field(path, std::string("expected ") + expected + ", got " + json_type_name(got));
}

const Json* present(const Json& object, std::string_view key) {
  const Json* v = find_field(object, key);
  return (v == nullptr || v->is_null()) ? nullptr : v;
}

}  // namespace

const Json* find_field(const Json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(std::string(key));
  return it == object.end() ? nullptr : &*it;
}

const Json& require_field(const Json& object, std::string_view key, const std::string& path) {
  const Json* v = present(object, key);
  if (v == nullptr) reject_field(join_path(path, key), "field required");
  return *v;
}

void expect_object(const Json& value, const std::string& path) {
  if (!value.is_object()) reject_type(path, "an object", value);
}

const std::string& expect_string(const Json& value, const std::string& path) {
  if (!value.is_string()) reject_type(path, "a string", value);
  return value.get_ref<const std::string&>();
}

std::string require_string(const Json& object, std::string_view key, const std::string& path) {
  return expect_string(require_field(object, key, path), join_path(path, key));
}

std::optional<std::string> optional_string(const Json& object, std::string_view key, const std::string& path) {
  const Json* v = present(object, key);
  if (v == nullptr) return std::nullopt;
  return expect_string(*v, join_path(path, key));
}

std::optional<bool> optional_bool(const Json& object, std::string_view key, const std::string& path) {
  const Json* v = present(object, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) reject_type(join_path(path, key), "a boolean", *v);
  return v->get<bool>();
}

std::optional<int64_t> optional_int(const Json& object, std::string_view key, const std::string& path) {
  const Json* v = present(object, key);
  if (v == nullptr) return std::nullopt;
  const std::string field = join_path(path, key);
  if (v->is_number_integer() && !v->is_number_unsigned()) return v->get<int64_t>();
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) reject_field(field, "integer out of range");
    return static_cast<int64_t>(u);
  }
  if (v->is_number_float()) {
    double d = v->get<double>();
    // 2^63 is exactly representable; anything at or beyond it does not fit.
    if (std::isfinite(d) && d == std::floor(d) && d >= -9.2233720368547758e18 && d < 9.2233720368547758e18)
      return static_cast<int64_t>(d);
    reject_field(field, "expected an integer, got " + v->dump());
  }
  reject_type(field, "an integer", *v);
}

std::optional<double> optional_number(const Json& object, std::string_view key, const std::string& path) {
  const Json* v = present(object, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) reject_type(join_path(path, key), "a number", *v);
  return v->get<double>();
}

const Json& require_array(const Json& object, std::string_view key, const std::string& path) {
  const Json& v = require_field(object, key, path);
  if (!v.is_array()) reject_type(join_path(path, key), "an array", v);
  return v;
}

const Json& require_object(const Json& object, std::string_view key, const std::string& path) {
  const Json& v = require_field(object, key, path);
  if (!v.is_object()) reject_type(join_path(path, key), "an object", v);
  return v;
}

}  // namespace keel::api
