// keel eval tools: argument checks, suite parsing, and a small run through the serving path.
#include <gtest/gtest.h>

#include <set>

#include "keel/eval/task_runner.h"
#include "keel/eval/task_suite.h"
#include "keel/util/error.h"
#include "test_support.h"

namespace keel::eval {
namespace {

using json = nlohmann::ordered_json;

TaskSuite suite_from(const char* text) { return parse_suite(json::parse(text), "test-suite"); }

const char* kSuite = R"({
  "name": "mini", "system": "You are a helpful coding assistant. When asked to perform tasks, you MUST use the available tools.",
  "toolsets": {"coding": [
    {"name": "Bash", "description": "Execute a bash command and return output.",
     "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}},
    {"name": "Read", "description": "Read a file from the filesystem.",
     "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}}]},
  "cases": [
    {"name": "ls tmp", "toolset": "coding", "messages": [{"role": "user", "content": "What files are in /tmp?"}],
     "expect": {"tool": "Bash", "arguments": {"command": {"contains": "ls", "matches": "^ls\\b"}}}},
    {"name": "hosts", "toolset": "coding", "messages": [{"role": "user", "content": "Show me the contents of /etc/hosts"}],
     "expect": {"tool": "Read", "arguments": {"file_path": {"equals": "/etc/hosts"}}}}]})";

ArgumentCheck check(const std::string& arg, const std::string& kind, const json& value) {
  json doc = {{"cases", {{{"name", "c"},
                          {"tools", {{{"name", "T"}}}},
                          {"messages", {{{"role", "user"}, {"content", "x"}}}},
                          {"expect", {{"tool", "T"}, {"arguments", {{arg, {{kind, value}}}}}}}}}}};
  return parse_suite(doc, "mem").cases[0].checks.at(0);
}

TEST(EvalTaskChecks, EqualsContainsMatches) {
  const json args = {{"command", "ls -la /tmp"}, {"count", 3}, {"flags", {"a", "b"}}};
  EXPECT_TRUE(check_argument(check("command", "equals", "ls -la /tmp"), args).pass);
  EXPECT_FALSE(check_argument(check("command", "equals", "ls /tmp"), args).pass);
  EXPECT_TRUE(check_argument(check("count", "equals", 3), args).pass);
  EXPECT_FALSE(check_argument(check("count", "equals", "3"), args).pass);  // JSON types must match
  EXPECT_TRUE(check_argument(check("flags", "equals", json{"a", "b"}), args).pass);
  EXPECT_TRUE(check_argument(check("command", "contains", "/tmp"), args).pass);
  EXPECT_FALSE(check_argument(check("command", "contains", "/var"), args).pass);
  EXPECT_FALSE(check_argument(check("count", "contains", "3"), args).pass);  // not a string
  EXPECT_TRUE(check_argument(check("command", "matches", "^ls\\s+-\\w+"), args).pass);
  EXPECT_FALSE(check_argument(check("command", "matches", "^cat"), args).pass);
  const CheckOutcome missing = check_argument(check("path", "equals", "x"), args);
  EXPECT_FALSE(missing.pass);
  EXPECT_NE(missing.reason.find("missing"), std::string::npos);
  EXPECT_FALSE(check_argument(check("command", "contains", "ls"), json::object()).pass);
}

TEST(EvalTaskChecks, CaseNeedsTheRightToolAndEveryCheck) {
  const TaskSuite s = suite_from(kSuite);
  const TaskCase& c = s.cases[0];
  EXPECT_EQ(c.checks.size(), 2u);
  EXPECT_EQ(c.messages[0]["role"], "system");  // suite system prompt put in front
  EXPECT_EQ(c.tools[0]["function"]["name"], "Bash");  // Anthropic tool form converted
  EXPECT_FALSE(check_case(c, std::nullopt).pass);
  EXPECT_FALSE(check_case(c, ObservedCall{"Read", {{"command", "ls"}}}).pass);
  EXPECT_TRUE(check_case(c, ObservedCall{"Bash", {{"command", "ls /tmp"}}}).pass);
  EXPECT_FALSE(check_case(c, ObservedCall{"Bash", {{"command", "cat ls"}}}).pass);  // contains, not matches
}

TEST(EvalTaskSuite, RejectsMalformedSuites) {
  EXPECT_THROW(suite_from(R"({"cases": []})"), Error);
  EXPECT_THROW(suite_from(R"({"cases": [{"name": "a", "messages": [{"role": "user", "content": "x"}],
    "tools": [{"name": "T"}], "expect": {"tool": "T", "arguments": {"a": {"matches": "("}}}}]})"), Error);
  EXPECT_THROW(suite_from(R"({"cases": [{"name": "a", "messages": [{"role": "user", "content": "x"}],
    "tools": [{"name": "T"}], "expect": {"tool": "T", "arguments": {"a": {"startswith": "x"}}}}]})"), Error);
  EXPECT_THROW(suite_from(R"({"cases": [{"name": "a", "messages": [{"role": "user", "content": "x"}],
    "toolset": "none", "expect": {"tool": "T"}}]})"), Error);
  EXPECT_THROW(suite_from(R"({"cases": [{"name": "a", "messages": [{"role": "user", "content": "x"}],
    "tools": [{"name": "T"}]}]})"), Error);
}

TEST(EvalTaskSuite, ACaseMayRequireACallOrNameItsTool) {
  auto with_choice = [](const std::string& choice) {
    return suite_from((R"({"cases": [{"name": "a", "messages": [{"role": "user", "content": "x"}],
      "tools": [{"name": "T"}, {"name": "U"}], "tool_choice": )" + choice + R"(, "expect": {"tool": "T"}}]})").c_str());
  };
  EXPECT_FALSE(suite_from(kSuite).cases[0].call_required);
  EXPECT_FALSE(with_choice(R"("auto")").cases[0].call_required);
  const TaskCase required = with_choice(R"("required")").cases[0];
  EXPECT_TRUE(required.call_required);
  EXPECT_EQ(required.required_tool, "");
  const TaskCase named = with_choice(R"({"name": "U"})").cases[0];
  EXPECT_TRUE(named.call_required);
  EXPECT_EQ(named.required_tool, "U");
  try {
    with_choice(R"({"name": "V"})");
    ADD_FAILURE() << "a tool the case lacks was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tool_choice names \"V\", which is not among the case's tools"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(with_choice(R"("any")"), Error);
  EXPECT_THROW(with_choice(R"({"type": "tool"})"), Error);
}

TEST(EvalTaskSuite, ShippedSuiteHasFortyCasesOverCodingAndApiTools) {
  const TaskSuite s = load_suite(test::source_dir() / "eval/suites/coding-tools.json");
  EXPECT_GE(s.cases.size(), 40u);
  std::set<std::string> tools;
  size_t multi_argument_checks = 0;
  for (const TaskCase& c : s.cases) {
    tools.insert(c.expect_tool);
    std::set<std::string> args;
    for (const ArgumentCheck& a : c.checks) args.insert(a.argument);
    if (args.size() >= 2) ++multi_argument_checks;
  }
  for (const char* t : {"Bash", "Read", "Edit", "Write", "Glob", "Grep"}) EXPECT_TRUE(tools.count(t)) << t;
  EXPECT_GE(tools.size(), 9u);  // API-style tools too
  EXPECT_GE(multi_argument_checks, 10u);
}

TEST(EvalTaskRunner, FullArmHasNoFlipsAndReuseMatchesFreshCaches) {
  ServedModel model(arch::resolve_model(test::source_dir() / "models" / "tiny-toolcaller"), ServedModelOptions{.threads = 2});
  const TaskSuite s = suite_from(kSuite);
  TaskOptions t;
  t.runs = 2;
  t.max_tokens = 48;
  const TaskResult r = run_tasks(model, s, parse_policy_list("int8"), {true, false}, t);
  // full is added as the reference arm, first in each reuse mode.
  ASSERT_EQ(r.arms.size(), 4u);
  EXPECT_EQ(r.arms[0].arm.label, "full");
  EXPECT_TRUE(r.arms[0].reuse);
  EXPECT_EQ(r.arms[0].flips(), 0);
  EXPECT_EQ(r.run_seeds, (std::vector<uint64_t>{1, 2}));
  for (const TaskArmResult& a : r.arms) ASSERT_EQ(a.runs.size(), 4u);
  // The second run of the long-lived arm reuses the cached prompts.
  EXPECT_GT(r.arms[0].reused_tokens(), 0);
  EXPECT_EQ(r.arms[2].reused_tokens(), 0);  // reuse off: fresh cache per request
  // Reuse is invisible (DESIGN.md invariant 4): same seeds, same outcomes.
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(outcome_signature(r.arms[0].runs[i]), outcome_signature(r.arms[2].runs[i])) << i;
    EXPECT_EQ(outcome_signature(r.arms[1].runs[i]), outcome_signature(r.arms[3].runs[i])) << i;
  }
  // The model picks the right tools on these two (README: 14/14 tool choice on the session suite).
  EXPECT_TRUE(r.arms[0].runs[0].called);
  EXPECT_EQ(r.arms[0].runs[0].call.name, "Bash");
}

}  // namespace
}  // namespace keel::eval
