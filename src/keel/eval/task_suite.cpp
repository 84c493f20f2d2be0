#include "keel/eval/task_suite.h"

#include <fstream>
#include <map>
#include <sstream>

#include "keel/util/error.h"

namespace keel::eval {
namespace {

using json = nlohmann::ordered_json;

ArgumentCheck make_check(const std::string& argument, const std::string& kind, const json& value,
                         const std::string& at) {
  ArgumentCheck c;
  c.argument = argument;
  c.value = value;
  if (kind == "equals") {
    c.kind = ArgumentCheck::Kind::Equals;
    return c;
  }
  if (!value.is_string()) throw Error(at + ": \"" + kind + "\" takes a string");
  if (kind == "contains") {
    c.kind = ArgumentCheck::Kind::Contains;
  } else if (kind == "matches") {
    c.kind = ArgumentCheck::Kind::Matches;
    c.regex = std::make_shared<const text::Regex>(value.get<std::string>(), at + ": regex");
  } else {
    throw Error(at + ": unknown check \"" + kind + "\" (expected equals, contains or matches)");
  }
  return c;
}

json tools_list(const json& tools, const std::string& at) {
  if (!tools.is_array() || tools.empty()) throw Error(at + ": tools must be a non-empty array");
  json out = json::array();
  for (const json& t : tools) out.push_back(to_function_tool(t));
  return out;
}

// "auto" (the default), "required" (some call), or {"name": TOOL} (that tool), as the request's
// tool_choice (keel opens the call for the model: toolcall::call_opener).
void read_tool_choice(const json& choice, const std::string& at, TaskCase& c) {
  if (choice.is_string() && (choice == "auto" || choice == "required")) {
    c.call_required = choice == "required";
    return;
  }
  if (choice.is_object() && choice.size() == 1 && choice.contains("name") && choice["name"].is_string()) {
    c.call_required = true;
    c.required_tool = choice["name"];
    for (const json& tool : c.tools)
      if (tool["function"]["name"] == c.required_tool) return;
    throw Error(at + ": tool_choice names \"" + c.required_tool + "\", which is not among the case's tools");
  }
  throw Error(at + ": tool_choice must be \"auto\", \"required\" or {\"name\": TOOL}, got " + choice.dump());
}

}  // namespace

json to_function_tool(const json& tool) {
  if (!tool.is_object()) throw Error("a tool must be a JSON object");
  if (tool.contains("function")) return tool;
  if (!tool.contains("name") || !tool["name"].is_string()) throw Error("a tool needs a \"name\"");
  json fn = {{"name", tool["name"]}};
  if (tool.contains("description")) fn["description"] = tool["description"];
  fn["parameters"] = tool.contains("input_schema") ? tool["input_schema"] : json{{"type", "object"}};
  return {{"type", "function"}, {"function", fn}};
}

TaskSuite parse_suite(const json& doc, const std::string& where) {
  if (!doc.is_object() || !doc.contains("cases") || !doc["cases"].is_array() || doc["cases"].empty())
    throw Error(where + ": a suite is an object with a non-empty \"cases\" array");
  TaskSuite suite;
  suite.name = doc.value("name", std::filesystem::path(where).stem().string());
  const std::string system = doc.contains("system") && doc["system"].is_string() ? doc["system"].get<std::string>() : "";
  std::map<std::string, json> toolsets;
  if (doc.contains("toolsets")) {
    if (!doc["toolsets"].is_object()) throw Error(where + ": \"toolsets\" must be an object");
    for (const auto& [name, tools] : doc["toolsets"].items())
      toolsets[name] = tools_list(tools, where + ": toolset " + name);
  }
  for (size_t i = 0; i < doc["cases"].size(); ++i) {
    const json& j = doc["cases"][i];
    TaskCase c;
    c.name = j.is_object() ? j.value("name", "case " + std::to_string(i + 1)) : "";
    const std::string at = where + ": case " + std::to_string(i + 1) + " (" + c.name + ")";
    if (!j.is_object()) throw Error(at + ": not an object");
    if (!j.contains("messages") || !j["messages"].is_array() || j["messages"].empty())
      throw Error(at + ": \"messages\" must be a non-empty array");
    c.messages = json::array();
    const bool has_system = j["messages"][0].value("role", "") == "system";
    if (!system.empty() && !has_system) c.messages.push_back({{"role", "system"}, {"content", system}});
    for (const json& m : j["messages"]) c.messages.push_back(m);
    if (j.contains("tools")) {
      c.tools = tools_list(j["tools"], at);
    } else {
      const std::string set = j.value("toolset", "");
      if (!toolsets.count(set)) throw Error(at + ": needs \"tools\" or a known \"toolset\"");
      c.tools = toolsets[set];
    }
    if (j.contains("tool_choice")) read_tool_choice(j["tool_choice"], at, c);
    if (!j.contains("expect") || !j["expect"].is_object() || !j["expect"].contains("tool") ||
        !j["expect"]["tool"].is_string())
      throw Error(at + ": \"expect\" needs a \"tool\" name");
    c.expect_tool = j["expect"]["tool"];
    if (j["expect"].contains("arguments")) {
      const json& args = j["expect"]["arguments"];
      if (!args.is_object()) throw Error(at + ": expect.arguments must be an object");
      for (const auto& [argument, checks] : args.items()) {
        if (!checks.is_object() || checks.empty())
          throw Error(at + ": expect.arguments." + argument + " must be an object of checks");
        for (const auto& [kind, value] : checks.items())
          c.checks.push_back(make_check(argument, kind, value, at + ": expect.arguments." + argument));
      }
    }
    suite.cases.push_back(std::move(c));
  }
  return suite;
}

TaskSuite load_suite(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read suite " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  json doc = json::parse(ss.str(), nullptr, false);
  if (doc.is_discarded()) throw Error(path.string() + " is not valid JSON");
  return parse_suite(doc, path.string());
}

CheckOutcome check_argument(const ArgumentCheck& check, const json& arguments) {
  if (!arguments.is_object() || !arguments.contains(check.argument))
    return {false, "argument \"" + check.argument + "\" is missing"};
  const json& v = arguments[check.argument];
  switch (check.kind) {
    case ArgumentCheck::Kind::Equals:
      if (v == check.value) return {true, ""};
      return {false, check.argument + " = " + v.dump() + ", expected " + check.value.dump()};
    case ArgumentCheck::Kind::Contains:
      if (v.is_string() && v.get<std::string>().find(check.value.get<std::string>()) != std::string::npos)
        return {true, ""};
      return {false, check.argument + " = " + v.dump() + " does not contain " + check.value.dump()};
    case ArgumentCheck::Kind::Matches:
      try {
        if (v.is_string() && !check.regex->find_all(v.get<std::string>()).empty()) return {true, ""};
      } catch (const Error& e) {
        return {false, check.argument + ": " + e.what()};  // invalid UTF-8 or runaway backtracking
      }
      return {false, check.argument + " = " + v.dump() + " does not match /" + check.value.get<std::string>() + "/"};
  }
  return {false, "unknown check"};
}

CheckOutcome check_case(const TaskCase& c, const std::optional<ObservedCall>& call) {
  if (!call) return {false, "no tool call"};
  if (call->name != c.expect_tool) return {false, "called " + call->name + ", expected " + c.expect_tool};
  for (const ArgumentCheck& check : c.checks) {
    CheckOutcome o = check_argument(check, call->arguments);
    if (!o.pass) return o;
  }
  return {true, ""};
}

}  // namespace keel::eval
