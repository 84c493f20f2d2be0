// Schema validation of parsed calls: every way a call is invalid, the coercions models need
// (strings from XML-style formats, numbers and booleans written as strings in JSON), dropped
// properties under additionalProperties: false, anyOf/enum, and key order kept.
#include <gtest/gtest.h>

#include "keel/toolcall/schema_check.h"

namespace {

using keel::toolcall::check_tool_call;
using keel::toolcall::ParsedCall;
using nlohmann::ordered_json;

const ordered_json& tools() {
  static const ordered_json t = ordered_json::parse(R"([
    {"type": "function", "function": {"name": "Bash", "description": "run",
      "parameters": {"type": "object", "properties": {
        "command": {"type": "string"}, "timeout": {"type": "integer"}, "background": {"type": "boolean"}},
        "required": ["command"]}}},
    {"type": "function", "function": {"name": "Read", "parameters": {"type": "object", "properties": {
        "file_path": {"type": "string"}, "limit": {"type": "number"}, "offset": {"type": ["integer", "null"]}},
        "required": ["file_path"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "Edit", "parameters": {"type": "object", "properties": {
        "edits": {"type": "array", "items": {"type": "object", "properties": {
            "old": {"type": "string"}, "new": {"type": "string"}}, "required": ["old", "new"]}},
        "options": {"type": "object", "properties": {"dry_run": {"type": "boolean"}, "mode": {"enum": ["fast", "safe", 3]}},
                    "required": ["mode"]},
        "target": {"anyOf": [{"type": "integer"}, {"type": "string", "enum": ["all", "none"]}]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}},
        "required": ["edits"]}}},
    {"name": "Ping", "input_schema": {"type": "object", "properties": {}}},
    {"type": "function", "function": {"name": "Free"}}
  ])");
  return t;
}

ParsedCall call(const std::string& name, const std::string& args_json, bool strings = false) {
  ParsedCall c;
  c.name = name;
  c.arguments = ordered_json::parse(args_json);
  c.arguments_are_strings = strings;
  return c;
}

// opencode's bash timeout: {"type": "integer", "exclusiveMinimum": 0}; draft 4 wrote the same as
// {"minimum": 0, "exclusiveMinimum": true}.
TEST(ToolcallSchemaCheck, ExclusiveBoundsExcludeTheBound) {
  const ordered_json t = ordered_json::parse(R"([
    {"name": "New", "input_schema": {"type": "object", "properties": {"timeout": {"type": "integer", "exclusiveMinimum": 0},
      "ratio": {"type": "number", "exclusiveMaximum": 1}}}},
    {"name": "Old", "input_schema": {"type": "object", "properties": {"timeout": {"type": "integer", "minimum": 0,
      "exclusiveMinimum": true}}}}])");
  EXPECT_TRUE(check_tool_call(call("New", R"({"timeout": 1, "ratio": 0.5})"), t).valid);
  EXPECT_FALSE(check_tool_call(call("New", R"({"timeout": 0})"), t).valid);
  EXPECT_FALSE(check_tool_call(call("New", R"({"timeout": -1})"), t).valid);
  EXPECT_NE(check_tool_call(call("New", R"({"ratio": 1})"), t).reason.find("exclusive maximum"), std::string::npos);
  EXPECT_TRUE(check_tool_call(call("Old", R"({"timeout": 5})"), t).valid);
  EXPECT_FALSE(check_tool_call(call("Old", R"({"timeout": 0})"), t).valid);
}

TEST(ToolcallSchemaCheck, ValidCallPassesUnchanged) {
  auto r = check_tool_call(call("Bash", R"({"command": "ls", "timeout": 5})"), tools());
  EXPECT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(r.name, "Bash");
  EXPECT_EQ(r.arguments.dump(), R"({"command":"ls","timeout":5})");
  EXPECT_TRUE(r.reason.empty());
}

TEST(ToolcallSchemaCheck, UnknownTool) {
  auto r = check_tool_call(call("Delete", R"({"path": "/"})"), tools());
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(r.reason, "unknown tool \"Delete\"");
}

TEST(ToolcallSchemaCheck, ArgumentsThatDidNotParse) {
  ParsedCall c;
  c.name = "Bash";
  c.problem = "arguments are not valid JSON: expected ':' at byte 12";
  auto r = check_tool_call(c, tools());
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(r.reason, c.problem);
}

TEST(ToolcallSchemaCheck, TruncatedCall) {
  ParsedCall c = call("Bash", R"({"command": "ls"})");
  c.truncated = true;
  c.problem = "the output ended inside the tool call";
  auto r = check_tool_call(c, tools());
  EXPECT_FALSE(r.valid);
  EXPECT_NE(r.reason.find("ended inside"), std::string::npos);
}

TEST(ToolcallSchemaCheck, MissingRequiredPropertyIncludingEmptyArguments) {
  auto r = check_tool_call(call("Bash", "{}"), tools());
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(r.reason, "missing required property \"command\"");
  r = check_tool_call(call("Bash", R"({"timeout": 3})"), tools());
  EXPECT_EQ(r.reason, "missing required property \"command\"");
  ParsedCall no_args;
  no_args.name = "Bash";  // arguments null: the model wrote none at all
  r = check_tool_call(no_args, tools());
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(r.reason, "missing required property \"command\"");
}

TEST(ToolcallSchemaCheck, NestedRequiredAndItems) {
  auto r = check_tool_call(call("Edit", R"({"edits": [{"old": "a", "new": "b"}, {"old": "c"}]})"), tools());
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(r.reason, "missing required property \"edits[1].new\"");
  r = check_tool_call(call("Edit", R"({"edits": [], "options": {"dry_run": true}})"), tools());
  EXPECT_EQ(r.reason, "missing required property \"options.mode\"");
}

TEST(ToolcallSchemaCheck, TypeMismatchAfterCoercion) {
  auto r = check_tool_call(call("Bash", R"({"command": 42})"), tools());
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(r.reason, "property \"command\" should be string, got number 42");
  r = check_tool_call(call("Bash", R"({"command": "ls", "timeout": "soon"})"), tools());
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(r.reason, "property \"timeout\" should be integer, got string \"soon\"");
  r = check_tool_call(call("Bash", R"({"command": "ls", "timeout": 2.5})"), tools());
  EXPECT_FALSE(r.valid);
}

TEST(ToolcallSchemaCheck, NumbersAndBooleansWrittenAsStringsInJson) {
  auto r = check_tool_call(call("Bash", R"({"command": "ls", "timeout": " 30 ", "background": "True"})"), tools());
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(r.arguments.dump(), R"({"command":"ls","timeout":30,"background":true})");
  r = check_tool_call(call("Read", R"({"file_path": "/a", "limit": "2.5"})"), tools());
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(r.arguments["limit"].get<double>(), 2.5);
}

TEST(ToolcallSchemaCheck, JsonFormatsDoNotParseObjectsOutOfStrings) {
  auto r = check_tool_call(call("Edit", R"({"edits": "[]"})"), tools());
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(r.reason, "property \"edits\" should be array, got string \"[]\"");
}

TEST(ToolcallSchemaCheck, XmlStringsCoercedToEverySchemaType) {
  auto r = check_tool_call(call("Edit",
                                R"({"tags": "[\"x\"]", "edits": "[{\"old\": \"a\", \"new\": \"b\"}]",
                                    "options": "{\"mode\": \"safe\", \"dry_run\": \"false\"}", "target": "7"})",
                                true),
                           tools());
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(r.arguments.dump(),
            R"({"tags":["x"],"edits":[{"old":"a","new":"b"}],"options":{"mode":"safe","dry_run":false},"target":7})");
  r = check_tool_call(call("Read", R"({"file_path": "/a", "offset": "null"})", true), tools());
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_TRUE(r.arguments["offset"].is_null());
  r = check_tool_call(call("Read", R"({"file_path": "/a", "offset": "12"})", true), tools());
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(r.arguments["offset"], 12);
}

TEST(ToolcallSchemaCheck, StringThatIsAlsoAllowedStaysAString) {
  // ["integer", "string"]-style unions: a value that already fits is not coerced.
  auto r = check_tool_call(call("Edit", R"({"edits": [], "target": "all"})", true), tools());
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(r.arguments["target"], "all");
  r = check_tool_call(call("Edit", R"({"edits": [], "target": "some"})", true), tools());
  EXPECT_FALSE(r.valid);
  EXPECT_NE(r.reason.find("matches none of the allowed schemas"), std::string::npos) << r.reason;
}

TEST(ToolcallSchemaCheck, Enums) {
  auto r = check_tool_call(call("Edit", R"({"edits": [], "options": {"mode": "slow"}})"), tools());
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(r.reason, R"(property "options.mode" must be one of ["fast","safe",3], got string "slow")");
  r = check_tool_call(call("Edit", R"({"edits": [], "options": {"mode": "3"}})", true), tools());
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(r.arguments["options"]["mode"], 3);
}

TEST(ToolcallSchemaCheck, AdditionalPropertiesFalseDropsUnknownKeys) {
  auto r = check_tool_call(call("Read", R"({"zzz": 1, "file_path": "/a", "extra": {"x": 1}, "limit": 3})"), tools());
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(r.arguments.dump(), R"({"file_path":"/a","limit":3})");
  // Without that rule unknown keys are kept.
  r = check_tool_call(call("Bash", R"({"zzz": 1, "command": "ls"})"), tools());
  ASSERT_TRUE(r.valid);
  EXPECT_EQ(r.arguments.dump(), R"({"zzz":1,"command":"ls"})");
}

TEST(ToolcallSchemaCheck, KeyOrderIsKept) {
  auto r = check_tool_call(call("Bash", R"({"timeout": 1, "command": "ls", "background": false})"), tools());
  ASSERT_TRUE(r.valid);
  EXPECT_EQ(r.arguments.dump(), R"({"timeout":1,"command":"ls","background":false})");
}

TEST(ToolcallSchemaCheck, Bounds) {
  auto r = check_tool_call(call("Edit", R"({"edits": [], "tags": ["a", "b", "c"]})"), tools());
  EXPECT_FALSE(r.valid);
  EXPECT_NE(r.reason.find("longer than maxItems 2"), std::string::npos) << r.reason;
}

TEST(ToolcallSchemaCheck, AnthropicShapeAndToolsWithoutSchema) {
  auto r = check_tool_call(call("Ping", "{}"), tools());
  EXPECT_TRUE(r.valid) << r.reason;
  r = check_tool_call(call("Free", R"({"anything": [1]})"), tools());
  EXPECT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(r.arguments.dump(), R"({"anything":[1]})");
}

TEST(ToolcallSchemaCheck, ArgumentsThatAreNotAnObject) {
  auto r = check_tool_call(call("Bash", R"(["ls"])"), tools());
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(r.reason, "arguments are not a JSON object but array");
}

TEST(ToolcallSchemaCheck, HostileSchemasDoNotThrow) {
  const ordered_json weird = ordered_json::parse(R"([
    {"type": "function", "function": {"name": "W", "parameters": {"type": 5, "properties": [1], "required": "x",
      "anyOf": "no", "enum": {}, "items": 3, "additionalProperties": "maybe", "minimum": "a"}}},
    "not a tool", 7, {"function": {"name": 3}}
  ])");
  auto r = check_tool_call(call("W", R"({"a": [1, {"b": null}]})"), weird);
  EXPECT_TRUE(r.valid) << r.reason;
  r = check_tool_call(call("X", "{}"), ordered_json::object());
  EXPECT_FALSE(r.valid);
}

}  // namespace
