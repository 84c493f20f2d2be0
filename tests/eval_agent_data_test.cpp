// The long agent data shipped for keel eval (eval/make_agent_sessions.py, recorded with keel eval
// record): the transcripts are agent-scale sessions dominated by tool results, and every task case
// asks for a value that only a tool result far back holds.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "keel/engine/served_model.h"
#include "keel/eval/task_suite.h"
#include "keel/eval/transcripts.h"
#include "test_support.h"

namespace keel::eval {
namespace {

using json = nlohmann::ordered_json;

ServedModel& tiny() {
  static std::unique_ptr<ServedModel> m;
  if (!m) {
    m = std::make_unique<ServedModel>(arch::resolve_model(test::source_dir() / "models" / "tiny-toolcaller"),
                                      ServedModelOptions{.threads = 2});
  }
  return *m;
}

TEST(EvalAgentData, TranscriptsAreLongSessionsDominatedByToolResults) {
  const auto transcripts = load_transcripts(test::source_dir() / "eval/transcripts/agent-long.jsonl");
  ASSERT_GE(transcripts.size(), 8u);
  for (const Transcript& t : transcripts) {
    SCOPED_TRACE(t.name);
    const PreparedPrompt p = tiny().prepare(t.messages, t.tools, false);
    const auto n = static_cast<int64_t>(p.ids.size());
    EXPECT_GE(n, 8000);
    EXPECT_LE(n, 30000);
    int64_t results = 0, calls = 0, preamble = 0;
    for (chat::Role r : p.roles) {
      results += r == chat::Role::tool_result;
      calls += r == chat::Role::tool_call;
      preamble += r == chat::Role::system || r == chat::Role::tools;
    }
    EXPECT_GT(results, n * 2 / 5);  // tool results are the bulk of the session
    EXPECT_GT(calls, 0);
    EXPECT_GT(preamble, 2000);  // a real system prompt and the six tools' schemas
    int64_t turns = 0;
    for (const json& m : t.messages) turns += m["role"] == "user" || m["role"] == "assistant";
    EXPECT_GE(turns, 10);
    EXPECT_LE(turns, 40);
    EXPECT_EQ(t.messages.back()["role"], "assistant");  // the model's own answer, recorded
  }
}

TEST(EvalAgentData, TaskCasesDependOnToolResultsFarBack) {
  const TaskSuite suite = load_suite(test::source_dir() / "eval/suites/agent-far-back.json");
  ASSERT_GE(suite.cases.size(), 8u);
  for (const TaskCase& c : suite.cases) {
    SCOPED_TRACE(c.name);
    ASSERT_EQ(c.expect_tool, "Read");
    ASSERT_EQ(c.checks.size(), 1u);
    const ArgumentCheck& check = c.checks.front();
    ASSERT_EQ(check.kind, ArgumentCheck::Kind::Contains);
    const std::string value = check.value.get<std::string>();
    // The value is in a tool result, never in what the user or the system prompt says.
    size_t first_result = c.messages.size();
    for (size_t i = 0; i < c.messages.size(); ++i) {
      const json& m = c.messages[i];
      const std::string content = m["content"].is_string() ? m["content"].get<std::string>() : m["content"].dump();
      if (m["role"] == "tool" && content.find(value) != std::string::npos && first_result == c.messages.size())
        first_result = i;
      if (m["role"] == "user" || m["role"] == "system") { EXPECT_EQ(content.find(value), std::string::npos) << i; }
    }
    ASSERT_LT(first_result, c.messages.size()) << value;
    // ... and thousands of tokens before the question.
    const json before(c.messages.begin(), c.messages.begin() + static_cast<std::ptrdiff_t>(first_result) + 1);
    const auto upto = static_cast<int64_t>(tiny().prepare(before, c.tools, false).ids.size());
    const auto all = static_cast<int64_t>(tiny().prepare(c.messages, c.tools, false).ids.size());
    EXPECT_GT(all - upto, 2000) << value;
  }
}

}  // namespace
}  // namespace keel::eval
