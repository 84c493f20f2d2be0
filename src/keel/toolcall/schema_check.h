#pragma once
// Checks a parsed call against the request's tools before anyone acts on it (DESIGN.md invariant
// 6: no silent bad calls). An unknown tool, arguments that did not parse or were cut off, a
// missing required property (including {} for a tool with required properties) or a value of the
// wrong type make the call invalid, with a reason the retry logic and the client can show.
// Values are coerced where models are known to write them as text: every value of an XML-style
// format, and numbers or booleans written as strings in JSON formats. Key order is kept.
// A pure function of the call and the tools: any thread.
#include <string>

#include <nlohmann/json.hpp>

#include "keel/toolcall/tool_call_parser.h"

namespace keel::toolcall {

struct CheckedCall {
  bool valid = false;
  std::string name;
  nlohmann::ordered_json arguments;  // coerced, unknown properties dropped where the schema forbids them
  std::string reason;                // why invalid: "unknown tool \"X\"", "missing required property \"command\"", ...
};

// tools: the request's tools in function form [{"type":"function","function":{"name","description","parameters"}}]
// (Anthropic's {"name", "input_schema"} shape is accepted too).
CheckedCall check_tool_call(const ParsedCall& call, const nlohmann::ordered_json& tools);

}  // namespace keel::toolcall
