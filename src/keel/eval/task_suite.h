#pragma once
// Tool-call suites for task mode. File format (JSON):
//   {"name": "coding-tools",
//    "system": "optional system prompt put before every case's messages",
//    "toolsets": {"coding": [tool, ...], "api": [...]},   // tool: Anthropic {name, description,
//                                                         // input_schema} or OpenAI function form
//    "cases": [{"name": "...", "toolset": "coding",       // or "tools": [tool, ...]
//               "messages": [OpenAI-form messages],
//               "expect": {"tool": "Bash",
//                          "arguments": {"command": {"contains": "ls"},
//                                        "file_path": {"equals": "/etc/hosts"},
//                                        "pattern": {"matches": "\\*\\.py$"}}}}]}
// A case may give "tool_choice": "auto" (the default), "required" or {"name": TOOL}, sent as the
// request's tool_choice: keel then opens the call for the model (docs/serve.md, tool_choice).
// Checks on an argument: equals (JSON equality), contains (substring of a string value), matches
// (a PCRE2 regex searched anywhere in a string value; anchor it with ^...$ for a full match; a
// pattern must match at least one character to count, as empty matches are ignored).
// Several checks on one argument must all hold.
//
// Threads: plain values and pure functions: any thread. A loaded TaskSuite is read-only and may be
// shared (a check's compiled regex keeps no state between matches).
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "keel/text/regex.h"

namespace keel::eval {

struct ArgumentCheck {
  enum class Kind { Equals, Contains, Matches };
  std::string argument;
  Kind kind = Kind::Equals;
  nlohmann::ordered_json value;        // Equals: any JSON; Contains/Matches: the string
  std::shared_ptr<const text::Regex> regex;  // Matches, compiled once at load
};

struct TaskCase {
  std::string name;
  nlohmann::ordered_json messages;  // system prompt already in front
  nlohmann::ordered_json tools;     // OpenAI function form
  bool call_required = false;  // tool_choice "required", or a named tool
  std::string required_tool;   // tool_choice {"name": ...}; empty: any tool
  std::string expect_tool;
  std::vector<ArgumentCheck> checks;
};

struct TaskSuite {
  std::string name;
  std::vector<TaskCase> cases;
};

// Throws keel::Error naming the case and field of anything malformed (bad regex included).
TaskSuite parse_suite(const nlohmann::ordered_json& doc, const std::string& where);
TaskSuite load_suite(const std::filesystem::path& path);

// A tool definition in either accepted form -> OpenAI function form.
nlohmann::ordered_json to_function_tool(const nlohmann::ordered_json& tool);

// The first call the model made in a turn, if any.
struct ObservedCall {
  std::string name;
  nlohmann::ordered_json arguments;
};

struct CheckOutcome {
  bool pass = false;
  std::string reason;  // empty on pass: the first check that failed otherwise
};

CheckOutcome check_argument(const ArgumentCheck& check, const nlohmann::ordered_json& arguments);
CheckOutcome check_case(const TaskCase& c, const std::optional<ObservedCall>& call);

}  // namespace keel::eval
