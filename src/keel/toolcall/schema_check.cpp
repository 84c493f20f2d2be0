#include "keel/toolcall/schema_check.h"

#include <cctype>
#include <cmath>
#include <optional>

#include "keel/toolcall/json_scan.h"

namespace keel::toolcall {
namespace {

using nlohmann::ordered_json;

// Tool schemas nest a few levels; past this the value is accepted as it is rather than recursing
// without bound on a hostile schema.
constexpr int kMaxSchemaDepth = 32;

std::string describe(const ordered_json& v) {
  std::string text = v.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return std::string(v.type_name()) + " " + text;
}

std::string property_label(const std::string& path) {
  return path.empty() ? "the arguments" : "property \"" + path + "\"";
}

std::string join(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// JSON text that is exactly one value, parsed; nullopt otherwise.
std::optional<ordered_json> parse_whole(const std::string& text) {
  // The trailing space ends a bare number, which the streaming scanner would otherwise call
  // unfinished.
  const std::string padded = text + " ";
  const JsonScan scan = scan_json_value(padded, 0);
  if (scan.status != JsonScan::Status::Complete || skip_json_space(padded, scan.end) != padded.size()) return std::nullopt;
  try {
    return ordered_json::parse(text);
  } catch (const ordered_json::exception&) {
    return std::nullopt;
  }
}

bool is_integral(const ordered_json& v) {
  if (v.is_number_integer()) return true;
  if (!v.is_number_float()) return false;
  const double d = v.get<double>();
  return std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9.0e15;
}

ordered_json as_integer(const ordered_json& v) {
  if (v.is_number_integer()) return v;
  return static_cast<int64_t>(v.get<double>());
}

bool has_type(const ordered_json& v, const std::string& type) {
  if (type == "string") return v.is_string();
  if (type == "integer") return is_integral(v);
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  return true;  // a type keel does not know constrains nothing it can check
}

class Checker {
 public:
  explicit Checker(bool values_are_strings) : strings_(values_are_strings) {}

  std::optional<ordered_json> check(const ordered_json& value, const ordered_json& schema, const std::string& path,
                                    int depth) {
    if (!schema.is_object() || depth > kMaxSchemaDepth) return value;
    ordered_json v = value;
    for (const char* key : {"anyOf", "oneOf"}) {
      auto branches = schema.find(key);
      if (branches == schema.end() || !branches->is_array() || branches->empty()) continue;
      std::optional<ordered_json> matched;
      std::string first_error;
      for (const ordered_json& branch : *branches) {
        Checker sub(strings_);
        matched = sub.check(v, branch, path, depth + 1);
        if (matched) break;
        if (first_error.empty()) first_error = sub.error;
      }
      if (!matched) return fail(property_label(path) + " matches none of the allowed schemas (" + first_error + ")");
      v = std::move(*matched);
    }
    if (auto all = schema.find("allOf"); all != schema.end() && all->is_array()) {
      for (const ordered_json& branch : *all) {
        auto r = check(v, branch, path, depth + 1);
        if (!r) return std::nullopt;
        v = std::move(*r);
      }
    }
    if (auto type = schema.find("type"); type != schema.end()) {
      std::vector<std::string> types;
      if (type->is_string()) types.push_back(type->get<std::string>());
      if (type->is_array()) {
        for (const ordered_json& t : *type) {
          if (t.is_string()) types.push_back(t.get<std::string>());
        }
      }
      if (!types.empty()) {
        auto typed = coerce_to_types(v, types);
        if (!typed) {
          std::string wanted;
          for (const std::string& t : types) wanted += (wanted.empty() ? "" : " or ") + t;
          return fail(property_label(path) + " should be " + wanted + ", got " + describe(v));
        }
        v = std::move(*typed);
      }
    }
    if (auto e = schema.find("enum"); e != schema.end() && e->is_array()) {
      if (!listed(v, *e)) return fail(property_label(path) + " must be one of " + e->dump() + ", got " + describe(v));
    }
    if (auto c = schema.find("const"); c != schema.end()) {
      const ordered_json allowed = ordered_json::array({*c});
      if (!listed(v, allowed)) return fail(property_label(path) + " must be " + c->dump() + ", got " + describe(v));
    }
    if (!bounds_hold(v, schema, path)) return std::nullopt;
    if (v.is_object()) return check_object(v, schema, path, depth);
    if (v.is_array()) return check_array(v, schema, path, depth);
    return v;
  }

  std::string error;

 private:
  std::nullopt_t fail(std::string why) {
    error = std::move(why);
    return std::nullopt;
  }

  std::optional<ordered_json> coerce_to_types(const ordered_json& v, const std::vector<std::string>& types) const {
    // A value that already has one of the types stays as it is ("5" for ["integer", "string"]).
    for (const std::string& t : types) {
      if (has_type(v, t)) return t == "integer" ? as_integer(v) : v;
    }
    if (!v.is_string()) return std::nullopt;
    const std::string text = trim(v.get<std::string>());
    for (const std::string& t : types) {
      if (t == "integer" || t == "number") {
        auto n = parse_whole(text);
        if (n && n->is_number() && (t == "number" || is_integral(*n))) return t == "integer" ? as_integer(*n) : *n;
      } else if (t == "boolean") {
        if (lower(text) == "true") return true;
        if (lower(text) == "false") return false;
      } else if (strings_ && t == "null") {
        if (lower(text) == "null" || lower(text) == "none") return nullptr;
      } else if (strings_ && (t == "object" || t == "array")) {
        auto parsed = parse_whole(text);
        if (parsed && has_type(*parsed, t)) return *parsed;
      }
    }
    return std::nullopt;
  }

  // Whether v is one of `allowed`; a string may stand for a listed number or boolean.
  bool listed(ordered_json& v, const ordered_json& allowed) const {
    for (const ordered_json& a : allowed) {
      if (a == v) return true;
    }
    if (!v.is_string()) return false;
    const std::string text = trim(v.get<std::string>());
    for (const ordered_json& a : allowed) {
      if (!a.is_string() && a.dump() == text) {
        v = a;
        return true;
      }
    }
    return false;
  }

  bool bounds_hold(const ordered_json& v, const ordered_json& schema, const std::string& path) {
    auto number = [&](const char* key) -> std::optional<double> {
      auto it = schema.find(key);
      if (it == schema.end() || !it->is_number()) return std::nullopt;
      return it->get<double>();
    };
    const std::string label = property_label(path);
    if (v.is_number()) {
      const double d = v.get<double>();
      if (auto m = number("minimum"); m && d < *m) return (void)fail(label + " is below the minimum " + std::to_string(*m)), false;
      if (auto m = number("maximum"); m && d > *m) return (void)fail(label + " is above the maximum " + std::to_string(*m)), false;
      // Draft 6 and later: the bound itself is excluded. Draft 4's boolean form excludes minimum / maximum.
      if (auto m = number("exclusiveMinimum"); m && d <= *m)
        return (void)fail(label + " is not above the exclusive minimum " + std::to_string(*m)), false;
      if (auto m = number("exclusiveMaximum"); m && d >= *m)
        return (void)fail(label + " is not below the exclusive maximum " + std::to_string(*m)), false;
      auto excluded = [&](const char* flag, const char* bound) {
        const auto it = schema.find(flag);
        const auto b = number(bound);
        return it != schema.end() && it->is_boolean() && it->get<bool>() && b && d == *b;
      };
      if (excluded("exclusiveMinimum", "minimum") || excluded("exclusiveMaximum", "maximum"))
        return (void)fail(label + " equals an excluded bound"), false;
    }
    size_t size = 0;
    const char* min_key = nullptr;
    const char* max_key = nullptr;
    if (v.is_string()) {
      size = v.get_ref<const std::string&>().size();
      min_key = "minLength";
      max_key = "maxLength";
    } else if (v.is_array()) {
      size = v.size();
      min_key = "minItems";
      max_key = "maxItems";
    }
    if (min_key != nullptr) {
      if (auto m = number(min_key); m && static_cast<double>(size) < *m) {
        return (void)fail(label + " is shorter than " + min_key + " " + std::to_string(static_cast<long long>(*m))), false;
      }
      if (auto m = number(max_key); m && static_cast<double>(size) > *m) {
        return (void)fail(label + " is longer than " + max_key + " " + std::to_string(static_cast<long long>(*m))), false;
      }
    }
    return true;
  }

  std::optional<ordered_json> check_object(const ordered_json& v, const ordered_json& schema, const std::string& path,
                                           int depth) {
    auto props_it = schema.find("properties");
    const ordered_json* props = props_it != schema.end() && props_it->is_object() ? &*props_it : nullptr;
    auto extra_it = schema.find("additionalProperties");
    const bool extra_forbidden = extra_it != schema.end() && extra_it->is_boolean() && !extra_it->get<bool>();
    const ordered_json* extra_schema = extra_it != schema.end() && extra_it->is_object() ? &*extra_it : nullptr;

    ordered_json out = ordered_json::object();
    for (const auto& [key, value] : v.items()) {
      const std::string sub_path = join(path, key);
      const ordered_json* sub_schema = nullptr;
      if (props != nullptr && props->contains(key)) {
        sub_schema = &(*props)[key];
      } else if (extra_forbidden) {
        continue;  // the schema forbids it: dropped, the call stays usable
      } else {
        sub_schema = extra_schema;
      }
      if (sub_schema == nullptr) {
        out[key] = value;
        continue;
      }
      auto checked = check(value, *sub_schema, sub_path, depth + 1);
      if (!checked) return std::nullopt;
      out[key] = std::move(*checked);
    }
    if (auto req = schema.find("required"); req != schema.end() && req->is_array()) {
      for (const ordered_json& name : *req) {
        if (name.is_string() && !out.contains(name.get<std::string>())) {
          return fail("missing required property \"" + join(path, name.get<std::string>()) + "\"");
        }
      }
    }
    return out;
  }

  std::optional<ordered_json> check_array(const ordered_json& v, const ordered_json& schema, const std::string& path,
                                          int depth) {
    auto items = schema.find("items");
    if (items == schema.end() || !items->is_object()) return v;
    ordered_json out = ordered_json::array();
    for (size_t i = 0; i < v.size(); ++i) {
      auto checked = check(v[i], *items, path + "[" + std::to_string(i) + "]", depth + 1);
      if (!checked) return std::nullopt;
      out.push_back(std::move(*checked));
    }
    return out;
  }

  bool strings_;
};

const ordered_json* find_tool(const ordered_json& tools, const std::string& name) {
  if (!tools.is_array()) return nullptr;
  for (const ordered_json& tool : tools) {
    if (!tool.is_object()) continue;
    const ordered_json& fn = tool.contains("function") && tool["function"].is_object() ? tool["function"] : tool;
    auto n = fn.find("name");
    if (n != fn.end() && n->is_string() && n->get_ref<const std::string&>() == name) return &fn;
  }
  return nullptr;
}

}  // namespace

CheckedCall check_tool_call(const ParsedCall& call, const ordered_json& tools) {
  CheckedCall out;
  out.name = call.name;
  if (call.truncated) {
    out.reason = call.problem.empty() ? "the output ended inside the tool call" : call.problem;
    return out;
  }
  if (!call.problem.empty()) {
    out.reason = call.problem;
    return out;
  }
  const ordered_json* fn = find_tool(tools, call.name);
  if (fn == nullptr) {
    out.reason = "unknown tool \"" + call.name + "\"";
    return out;
  }
  const ordered_json args = call.arguments.is_null() ? ordered_json::object() : call.arguments;
  if (!args.is_object()) {
    out.reason = std::string("arguments are not a JSON object but ") + args.type_name();
    return out;
  }
  const ordered_json* schema = nullptr;
  for (const char* key : {"parameters", "input_schema"}) {
    auto it = fn->find(key);
    if (it != fn->end()) {
      schema = &*it;
      break;
    }
  }
  if (schema == nullptr) {
    out.valid = true;
    out.arguments = args;
    return out;
  }
  Checker checker(call.arguments_are_strings);
  auto checked = checker.check(args, *schema, "", 0);
  if (!checked) {
    out.reason = checker.error;
    return out;
  }
  out.valid = true;
  out.arguments = std::move(*checked);
  return out;
}

}  // namespace keel::toolcall
