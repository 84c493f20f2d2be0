// The real Claude Code CLI (npm @anthropic-ai/claude-code, the version pinned in
// tests/clients/package-lock.json, installed into <build>/clients by
// scripts/install-client-tests.sh) run headless against a real `keel serve`:
//
//   claude -p PROMPT --output-format stream-json --verbose             (turn 1)
//   claude -p PROMPT --continue --output-format stream-json --verbose  (turn 2, same session)
//
// with its default model, tools and system prompt, through a recording proxy
// (tests/clients/recording_proxy.cjs) that logs every request and answer. It checks:
//   (a) turn 1 ends with a `result` that is not an error;
//   (b) turn 2 reads turn 1's whole prompt from keel's prefix cache (usage.cache_read_input_tokens);
//   (c) the mid-conversation system message Claude Code puts at messages[1] is answered 200 with a
//       complete stream (and whether the mid-conversation-system beta header came with it);
//   (d) keel logged no 4xx/5xx and no generation error, and the proxy saw none;
//   (e) the model's Bash call ran and its result, a file name NFC rewrites, went back to keel.
// docs/claude-code.md describes what Claude Code sends. Skipped when npm/node are not installed.
//
// The model: Claude Code's prompt is ~24.5k tokens under tiny-toolcaller's 1,661-token vocabulary
// and ~11.7k under the real Qwen2.5 tokenizer, so the test serves a scripted model
// (scripted_model_support.h: one layer, the real Qwen2.5 tokenizer and chat template, weights
// set by hand). Its first answer is a Bash call, `ls`, in a project folder that holds a file with
// a decomposed name (as macOS writes them), so the tool result Claude Code sends back carries text
// that Qwen2.5's NFC normalizer rewrites; once a tool result is in the conversation it answers
// "Hello\u0301" (a decomposed "o\u0301", sent back in turn 2) and ends its turn. The working
// directory, in the system prompt, and the prompt carry decomposed names too. The test checks the
// protocol, not the answer.
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "client_support.h"
#include "scripted_model_support.h"
#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::json;

std::vector<json> json_lines(const std::string& text) {
  std::vector<json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, false);
    if (!j.is_discarded()) out.push_back(std::move(j));
  }
  return out;
}

// One `claude -p` run: its stream-json messages and the final `result`.
struct ClaudeRun {
  ProcessResult process;
  std::vector<json> messages;
  json result;                    // the `result` message, null when there was none
  std::vector<json> assistant;    // `assistant` messages
  std::string api_error_text;     // the first assistant text that starts with "API Error"
};

ClaudeRun run_claude(const std::vector<std::string>& args, const std::vector<std::string>& env,
                     const std::filesystem::path& cwd, std::chrono::seconds timeout) {
  std::vector<std::string> argv = {(client_install().node_modules / ".bin" / "claude").string()};
  argv.insert(argv.end(), args.begin(), args.end());
  ClaudeRun run;
  run.process = run_process(argv, env, cwd, timeout);
  run.messages = json_lines(run.process.out);
  for (const auto& m : run.messages) {
    if (m.value("type", "") == "result") run.result = m;
    if (m.value("type", "") == "assistant") {
      run.assistant.push_back(m);
      for (const auto& block : m.value("message", json::object()).value("content", json::array()))
        if (block.value("type", "") == "text" && block.value("text", "").rfind("API Error", 0) == 0 &&
            run.api_error_text.empty())
          run.api_error_text = block["text"];
    }
  }
  return run;
}

int64_t usage_value(const json& usage, const char* key) {
  return usage.is_object() && usage.contains(key) && usage[key].is_number_integer() ? usage[key].get<int64_t>() : 0;
}

std::string describe(const ClaudeRun& run) {
  std::ostringstream s;
  s << "exit " << run.process.exit_code << (run.process.timed_out ? " (timed out)" : "") << " after "
    << run.process.seconds << " s\n--- stdout (stream-json) ---\n"
    << run.process.out.substr(0, 20000) << "\n--- stderr ---\n"
    << run.process.err.substr(0, 8000);
  return s.str();
}

TEST(ClaudeCode, HeadlessSessionAgainstKeelServe) {
  const ClientInstall& install = client_install();
  if (!install.skip_reason.empty()) GTEST_SKIP() << install.skip_reason;
  ASSERT_TRUE(install.error.empty()) << install.error;
  std::cout << "client install: " << install.seconds << " s\n";

  TempDir tmp;
  const auto model = write_scripted_model(
      tmp, R"(<tool_call>{"name":"Bash","arguments":{"command":"ls","description":"List files"}}</tool_call>)",
      "Hello\u0301");
  const auto t0 = std::chrono::steady_clock::now();
  ServerProcess server({"--model", model.string(), "--alias", "*", "--context", std::to_string(kScriptedModelContext)});
  const double start_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const auto proxy_log = tmp.path() / "requests.jsonl";
  BackgroundProcess proxy({install.node.string(), (client_scripts_dir() / "recording_proxy.cjs").string(),
                           std::to_string(server.port()), proxy_log.string()},
                          current_environment());
  const std::string proxy_port = proxy.wait_for_line("listening ", std::chrono::seconds(30));

  const auto home = tmp.path() / "home";
  // Decomposed names, as macOS writes them: the working directory reaches the system prompt.
  const auto project = tmp.path() / "project-Re\u0301sume\u0301s";
  std::filesystem::create_directories(home);
  std::filesystem::create_directories(project);
  const char* path = std::getenv("PATH");
  // The whole environment Claude Code sees. Nothing else leaks in (no API keys of the machine).
  const std::vector<std::string> env = {
      "PATH=" + std::string(path ? path : "/usr/local/bin:/usr/bin:/bin"),
      "HOME=" + home.string(),
      "ANTHROPIC_BASE_URL=http://127.0.0.1:" + proxy_port,
      "ANTHROPIC_AUTH_TOKEN=keel-test",
      // A test must not update the client it pins. Everything else is Claude Code's default: its
      // connectivity check (HEAD /api/hello), telemetry attempts that fail without a network, and
      // max_tokens 128000 (keel caps and clamps it).
      "DISABLE_AUTOUPDATER=1",
      // An error keel returns ends the run at once instead of after ~10 backed-off retries.
      "CLAUDE_CODE_MAX_RETRIES=0",
  };

  // Turn 1 prefills Claude Code's whole prompt (~11.7k tokens): ~5 s in a Release build on 2
  // threads, ~45 s under AddressSanitizer.
  std::ofstream(project / "Re\u0301sume\u0301.pdf") << "%PDF-1.4\n";
  const ClaudeRun first = run_claude({"-p", "List the files, then say hello.", "--allowedTools", "Bash",
                                      "--output-format", "stream-json", "--verbose"},
                                     env, project, std::chrono::seconds(330));
  // Turn 2 continues the same conversation from Claude Code's transcript under HOME.
  const ClaudeRun second = run_claude(
      {"-p", "Say it once more.", "--continue", "--output-format", "stream-json", "--verbose"}, env, project,
      std::chrono::seconds(180));

  const std::vector<json> requests =
      std::filesystem::exists(proxy_log) ? json_lines(read_text(proxy_log)) : std::vector<json>{};
  const std::string log = server.log();
  std::cout << "keel serve start " << start_seconds << " s, turn 1 " << first.process.seconds << " s, turn 2 "
            << second.process.seconds << " s, " << requests.size() << " requests\n";
  ::testing::Test::RecordProperty("turn1_seconds", std::to_string(first.process.seconds));
  ::testing::Test::RecordProperty("turn2_seconds", std::to_string(second.process.seconds));

  // What Claude Code sent, one line per request (visible in the test output).
  std::ostringstream sent;
  for (const auto& r : requests) {
    const json b = r.value("body", json());
    sent << r.value("method", "") << " " << r.value("url", "") << " -> " << r.value("status", 0) << " ("
         << r.value("ms", 0) << " ms)";
    if (b.is_object()) {
      sent << " model " << b.value("model", "") << ", max_tokens " << b.value("max_tokens", 0) << ", "
           << b.value("tools", json::array()).size() << " tools, roles";
      for (const auto& m : b.value("messages", json::array())) sent << " " << m.value("role", "?");
      if (b.contains("thinking")) sent << ", thinking " << b["thinking"].dump();
    }
    sent << ", anthropic-beta: " << r.value("headers", json::object()).value("anthropic-beta", "(none)") << "\n";
  }
  auto result_line = [](const ClaudeRun& run) {
    if (!run.result.is_object()) return std::string("(none)");
    return run.result.value("subtype", "?") + ", is_error " + run.result.value("is_error", json()).dump() + ", " +
           run.result.value("terminal_reason", "?") + ": " + run.result.value("result", json("")).dump().substr(0, 300);
  };
  std::cout << sent.str() << "keel serve log:\n"
            << log << "turn 1 result: " << result_line(first) << "\nturn 2 result: " << result_line(second) << "\n";

  // (a) Turn 1 completes without an API error.
  ASSERT_FALSE(first.result.is_null()) << "no result message from turn 1\n" << describe(first);
  EXPECT_EQ(first.result.value("subtype", ""), "success") << describe(first);
  EXPECT_EQ(first.result.value("is_error", true), false) << describe(first);
  EXPECT_EQ(first.api_error_text, "") << describe(first);
  EXPECT_EQ(first.process.exit_code, 0) << describe(first);
  // The answer carries the decomposed acute that turn 2 sends back.
  EXPECT_NE(first.result.value("result", "").find("\u0301"), std::string::npos) << describe(first);
  // (e) The Bash call reached Claude Code, ran, and its result (back to keel in the next request)
  // lists the decomposed file name.
  bool listed = false;
  for (const auto& m : first.messages)
    if (m.value("type", "") == "user")
      for (const auto& block : m.value("message", json::object()).value("content", json::array()))
        if (block.value("type", "") == "tool_result" && block.dump().find("Re\u0301sume\u0301.pdf") != std::string::npos)
          listed = true;
  EXPECT_TRUE(listed) << "no Bash result listing the decomposed file name\n" << describe(first);

  // (b) Turn 2's first request reads turn 1's whole prompt from the prefix cache.
  ASSERT_FALSE(first.assistant.empty()) << describe(first);
  const json usage1 = first.assistant.front().value("message", json::object()).value("usage", json::object());
  const int64_t prompt1 = usage_value(usage1, "input_tokens") + usage_value(usage1, "cache_read_input_tokens") +
                          usage_value(usage1, "cache_creation_input_tokens");
  std::cout << "turn 1 prompt: " << prompt1 << " tokens (Qwen2.5 tokenizer)\n";
  ::testing::Test::RecordProperty("turn1_prompt_tokens", std::to_string(prompt1));
  EXPECT_GT(prompt1, 1000) << usage1.dump();
  ASSERT_FALSE(second.result.is_null()) << "no result message from turn 2\n" << describe(second);
  EXPECT_EQ(second.result.value("is_error", true), false) << describe(second);
  ASSERT_FALSE(second.assistant.empty()) << describe(second);
  const json usage2 = second.assistant.front().value("message", json::object()).value("usage", json::object());
  std::cout << "turn 2 usage: " << usage2.dump() << "\n";
  EXPECT_GE(usage_value(usage2, "cache_read_input_tokens"), prompt1)
      << "turn 2 did not reuse turn 1's prompt: " << usage2.dump();

  // (c) The mid-conversation system message at messages[1] was sent and answered 200 in full.
  bool system_at_1 = false, answered = false;
  std::string betas;
  for (const auto& r : requests) {
    const json b = r.value("body", json());
    if (!b.is_object() || r.value("url", "").rfind("/v1/messages", 0) != 0) continue;
    const json& messages = b.value("messages", json::array());
    if (messages.size() < 2 || messages[1].value("role", "") != "system") continue;
    system_at_1 = true;
    betas = r.value("headers", json::object()).value("anthropic-beta", "");
    const json& events = r.value("sse_events", json::array());
    if (r.value("status", 0) == 200 && r.value("error_events", json::array()).empty() &&
        (!b.value("stream", false) || (!events.empty() && events.back() == "message_stop")))
      answered = true;
  }
  EXPECT_TRUE(system_at_1) << "no request had {\"role\":\"system\"} at messages[1]:\n" << sent.str();
  EXPECT_TRUE(answered) << "the request with a system message at messages[1] was not answered 200 in full:\n"
                        << sent.str();
  std::cout << "mid-conversation system message sent"
            << (betas.find("mid-conversation-system-2026-04-07") != std::string::npos
                    ? " with the mid-conversation-system-2026-04-07 beta header\n"
                    : " without a mid-conversation-system beta header (generally available in this version)\n");

  // (d) No 4xx/5xx from keel (its log has a line for each) and no failed generation.
  EXPECT_EQ(error_lines(log), "") << log;
  EXPECT_EQ(log.find(", error: "), std::string::npos) << log;
  for (const auto& r : requests) {
    EXPECT_LT(r.value("status", 0), 400) << r.dump().substr(0, 4000);
    EXPECT_TRUE(r.value("error_events", json::array()).empty()) << r.dump().substr(0, 4000);
    EXPECT_FALSE(r.contains("upstream_error")) << r.dump().substr(0, 4000);
  }
  EXPECT_GE(requests.size(), 2u) << sent.str();
}

}  // namespace
}  // namespace keel::test
