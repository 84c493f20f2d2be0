// Fuzz target: schema checking of a parsed call. The input is a JSON document
// {"tools": [...], "call": {"name": ..., "arguments": ...}, "strings": bool}; anything that is not
// such a document is used as the arguments text of a call to a fixed tool instead, so mutations
// exercise both hostile schemas and hostile arguments. check_tool_call must never throw or crash,
// and a valid result must carry an arguments object.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "keel/toolcall/json_scan.h"
#include "keel/toolcall/schema_check.h"
#include "limited_json.h"

namespace {

using nlohmann::ordered_json;

const ordered_json& fixed_tools() {
  static const ordered_json tools = ordered_json::parse(R"([{"type": "function", "function": {"name": "Edit",
    "parameters": {"type": "object", "additionalProperties": false, "required": ["path"], "properties": {
      "path": {"type": "string", "minLength": 1}, "line": {"type": "integer", "minimum": 1},
      "mode": {"enum": ["a", "b", 3]}, "ratio": {"type": ["number", "null"]},
      "opts": {"type": "object", "properties": {"x": {"type": "boolean"}}, "required": ["x"]},
      "items": {"type": "array", "items": {"anyOf": [{"type": "integer"}, {"type": "string"}]}, "maxItems": 4}}}}}])");
  return tools;
}


void check(const keel::toolcall::ParsedCall& call, const ordered_json& tools) {
  const auto result = keel::toolcall::check_tool_call(call, tools);
  if (result.valid && !result.arguments.is_object()) std::abort();
  if (!result.valid && result.reason.empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  ordered_json doc;
  if (keel::fuzz::parse_limited(input, doc) && doc.is_object() && doc.contains("call") && doc["call"].is_object()) {
    keel::toolcall::ParsedCall call;
    const ordered_json& c = doc["call"];
    if (c.contains("name") && c["name"].is_string()) call.name = c["name"].get<std::string>();
    if (c.contains("arguments")) call.arguments = c["arguments"];
    call.arguments_are_strings = doc.contains("strings") && doc["strings"] == true;
    check(call, doc.contains("tools") ? doc["tools"] : ordered_json());
    return 0;
  }
  for (bool strings : {false, true}) {
    keel::toolcall::ParsedCall call;
    call.name = "Edit";
    call.arguments_are_strings = strings;
    if (!keel::fuzz::parse_limited(input, call.arguments)) call.problem = "arguments are not valid JSON";
    check(call, fixed_tools());
  }
  return 0;
}
