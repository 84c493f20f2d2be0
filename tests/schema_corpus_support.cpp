#include "schema_corpus_support.h"

#include <algorithm>
#include <fstream>

#include "test_support.h"

namespace keel::test {
namespace {

using Json = nlohmann::ordered_json;

// Structured-output schemas of the shapes the SDK guides use: nested objects, arrays of objects,
// enums, nullable fields, recursion through $defs.
const char* const kSdkSchemas[][2] = {
    {"sdk/calendar_event", R"({"type":"object","properties":{"name":{"type":"string"},"date":{"type":"string"},
      "participants":{"type":"array","items":{"type":"string"}}},"required":["name","date","participants"],
      "additionalProperties":false})"},
    {"sdk/math_steps", R"({"type":"object","properties":{"steps":{"type":"array","items":{"type":"object",
      "properties":{"explanation":{"type":"string"},"output":{"type":"string"}},"required":["explanation","output"],
      "additionalProperties":false}},"final_answer":{"type":"string"}},"required":["steps","final_answer"],
      "additionalProperties":false})"},
    {"sdk/contact", R"({"type":"object","properties":{"name":{"type":"string"},"email":{"type":"string","format":"email"},
      "plan":{"type":"string","enum":["free","pro","enterprise"]},"demo_requested":{"type":"boolean"},
      "seats":{"type":["integer","null"]}},"required":["name","email","plan","demo_requested"],"additionalProperties":false})"},
    {"sdk/ui_tree", R"({"$defs":{"node":{"type":"object","properties":{"type":{"type":"string","enum":["div","button","header","section"]},
      "label":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}},
      "attributes":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"value":{"type":"string"}},
      "required":["name","value"],"additionalProperties":false}}},"required":["type","label","children","attributes"],
      "additionalProperties":false}},"$ref":"#/$defs/node"})"},
    {"sdk/moderation", R"({"type":"object","properties":{"is_violating":{"type":"boolean"},
      "category":{"anyOf":[{"type":"string","enum":["violence","sexual","self_harm"]},{"type":"null"}]},
      "explanation":{"anyOf":[{"type":"string"},{"type":"null"}]}},"required":["is_violating","category","explanation"],
      "additionalProperties":false})"},
    {"sdk/title", R"({"type":"object","properties":{"title":{"type":"string"}},"required":["title"],"additionalProperties":false})"},
    {"sdk/scores", R"({"type":"object","properties":{"scores":{"type":"array","items":{"type":"number"},"minItems":1,"maxItems":5},
      "labels":{"type":"object","additionalProperties":{"type":"integer"}}},"required":["scores"]})"},
};

// A document the schema allows: with `full`, every declared property and two array items;
// otherwise only what is required.
Json example(const Json& schema, const Json& root, bool full, int depth) {
  if (depth > 6) return nullptr;
  if (schema.is_boolean()) return full ? Json{{"k", 1}} : Json(nullptr);
  if (schema.contains("$ref")) {
    const std::string ref = schema["$ref"];
    const Json* at = &root;
    std::string rest = ref.substr(1);
    while (!rest.empty()) {
      const size_t next = rest.find('/', 1);
      at = &(*at)[rest.substr(1, next == std::string::npos ? std::string::npos : next - 1)];
      rest = next == std::string::npos ? "" : rest.substr(next);
    }
    return example(*at, root, full && depth < 3, depth + 1);
  }
  if (schema.contains("const")) return schema["const"];
  if (schema.contains("enum")) return full ? schema["enum"].back() : schema["enum"].front();
  for (const char* key : {"anyOf", "oneOf", "allOf"})
    if (schema.contains(key)) return example(full ? schema[key].back() : schema[key].front(), root, full, depth + 1);
  std::string type = "object";
  if (schema.contains("type")) type = schema["type"].is_array() ? schema["type"][full ? schema["type"].size() - 1 : 0] : schema["type"];
  else if (!schema.contains("properties") && !schema.contains("required") && !schema.contains("additionalProperties")) type = "string";
  if (type == "string") return full ? "path/to/file \"quoted\" \u00e9\u4e2d\n" : "";
  if (type == "integer") return full ? -120 : 0;
  if (type == "number") return full ? 2.5e-3 : 1;
  if (type == "boolean") return full;
  if (type == "null") return nullptr;
  if (type == "array") {
    Json out = Json::array();
    const size_t min_items = schema.value("minItems", 0);
    const size_t count = std::min<size_t>(std::max<size_t>(min_items, full ? 2 : 0), schema.value("maxItems", 2));
    for (size_t i = 0; i < count; ++i) out.push_back(example(schema.value("items", Json::object()), root, full, depth + 1));
    return out;
  }
  Json out = Json::object();
  const Json props = schema.value("properties", Json::object());
  const Json required = schema.value("required", Json::array());
  for (const auto& [name, sub] : props.items())
    if (full || std::find(required.begin(), required.end(), name) != required.end())
      out[name] = example(sub, root, full, depth + 1);
  return out;
}

const Json* resolve(const Json& root, const std::string& ref) {
  const Json* at = &root;
  std::string rest = ref.substr(1);
  while (!rest.empty()) {
    const size_t next = rest.find('/', 1);
    const std::string token = rest.substr(1, next == std::string::npos ? std::string::npos : next - 1);
    if (!at->is_object() || !at->contains(token)) return nullptr;
    at = &(*at)[token];
    rest = next == std::string::npos ? "" : rest.substr(next);
  }
  return at;
}

bool has_type(const Json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "integer") return v.is_number_integer() || v.is_number_unsigned() ||
                                (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>())));
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  return false;
}

std::string violation(const Json& schema, const Json& v, const Json& root, const std::string& at) {
  if (schema.is_boolean()) return schema.get<bool>() ? "" : at + ": false schema";
  if (schema.contains("$ref")) {
    const Json* target = resolve(root, schema["$ref"]);
    return target ? violation(*target, v, root, at) : at + ": unresolved $ref";
  }
  if (schema.contains("const") && schema["const"] != v) return at + ": not the const";
  if (schema.contains("enum") && std::find(schema["enum"].begin(), schema["enum"].end(), v) == schema["enum"].end())
    return at + ": not in enum";
  for (const char* key : {"anyOf", "oneOf"})
    if (schema.contains(key) &&
        std::none_of(schema[key].begin(), schema[key].end(), [&](const Json& s) { return violation(s, v, root, at).empty(); }))
      return at + ": matches no " + key + " alternative";
  if (schema.contains("allOf"))
    for (const Json& s : schema["allOf"])
      if (auto why = violation(s, v, root, at); !why.empty()) return why;
  if (schema.contains("type")) {
    std::vector<std::string> types;
    if (schema["type"].is_array()) for (const Json& t : schema["type"]) types.push_back(t);
    else types.push_back(schema["type"]);
    if (schema.value("nullable", false)) types.push_back("null");
    if (std::none_of(types.begin(), types.end(), [&](const std::string& t) { return has_type(v, t); }))
      return at + ": wrong type " + v.type_name();
  }
  if (v.is_object()) {
    const Json props = schema.value("properties", Json::object());
    for (const Json& r : schema.value("required", Json::array()))
      if (!v.contains(r.get<std::string>())) return at + ": missing " + r.get<std::string>();
    for (const auto& [key, value] : v.items()) {
      if (props.contains(key)) {
        if (auto why = violation(props[key], value, root, at + "." + key); !why.empty()) return why;
      } else if (schema.contains("additionalProperties")) {
        if (auto why = violation(schema["additionalProperties"], value, root, at + "." + key); !why.empty()) return why;
      }
    }
  }
  if (v.is_array()) {
    if (v.size() < schema.value("minItems", size_t{0})) return at + ": too few items";
    if (schema.contains("maxItems") && v.size() > schema["maxItems"].get<size_t>()) return at + ": too many items";
    if (schema.contains("items"))
      for (size_t i = 0; i < v.size(); ++i)
        if (auto why = violation(schema["items"], v[i], root, at + "." + std::to_string(i)); !why.empty()) return why;
  }
  return "";
}

}  // namespace

std::string schema_violation(const Json& schema, const Json& value) { return violation(schema, value, schema, "$"); }

std::vector<CorpusSchema> schema_corpus() {
  std::vector<CorpusSchema> out;
  auto add = [&](std::string label, Json schema) {
    CorpusSchema entry{std::move(label), std::move(schema), {}};
    entry.valid = {example(entry.schema, entry.schema, false, 0), example(entry.schema, entry.schema, true, 0)};
    out.push_back(std::move(entry));
  };
  for (const auto& [label, text] : kSdkSchemas) add(label, Json::parse(text));
  const auto dir = source_dir() / "tests" / "data" / "tool_schemas";
  if (std::filesystem::is_directory(dir)) {
    std::vector<std::filesystem::path> files;
    for (const auto& f : std::filesystem::directory_iterator(dir))
      if (f.path().extension() == ".json") files.push_back(f.path());
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      std::ifstream in(file);
      // A tool sent without parameters takes none: an empty object.
      for (const Json& tool : Json::parse(in))
        add(file.stem().string() + "/" + tool["name"].get<std::string>(),
            tool["schema"].is_null() ? Json{{"type", "object"}, {"properties", Json::object()}} : tool["schema"]);
    }
  }
  return out;
}

}  // namespace keel::test
