// Agent CLIs other than Claude Code (tests/claude_code_test.cpp), each pinned in
// tests/clients/package-lock.json, run headless against a real `keel serve` for one prompt with a
// tool round trip. The model is scripted (scripted_model_support.h): it calls the client's own
// shell tool with `ls` first, and answers "Done" once a tool result is in the conversation. Each
// test checks the protocol, not the model: the session completes, the call reaches the client
// and runs, its result comes back, and keel answered no request with a 4xx/5xx. The project
// folder holds a file with a decomposed name (as macOS writes them), so the tool result that
// goes back carries text NFC rewrites. Skipped when npm/node are not installed; CTest label
// `clients` runs these alone.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "client_support.h"
#include "scripted_model_support.h"
#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::json;

constexpr const char* kDecomposedFile = "Re\u0301sume\u0301.pdf";

std::vector<json> json_lines(const std::string& text) {
  std::vector<json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line, nullptr, false);
    if (!j.is_discarded()) out.push_back(std::move(j));
  }
  return out;
}

// The server, the scripted model and a project folder, for one client.
struct Session {
  TempDir tmp;
  std::filesystem::path model;
  std::unique_ptr<ServerProcess> server;
  std::filesystem::path home, project;

  explicit Session(const std::string& tool_call) {
    model = write_scripted_model(tmp, "<tool_call>" + tool_call + "</tool_call>", "Done");
    server = std::make_unique<ServerProcess>(std::vector<std::string>{
        "--model", model.string(), "--alias", "*", "--context", std::to_string(kScriptedModelContext)});
    home = tmp.path() / "home";
    project = tmp.path() / "project";
    std::filesystem::create_directories(home);
    std::filesystem::create_directories(project);
    std::ofstream(project / kDecomposedFile) << "%PDF-1.4\n";
  }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(server->port()) + "/v1"; }
  // The routes keel logged, one line per request, for the test output.
  std::string requests() const {
    std::string out;
    std::istringstream in(server->log());
    for (std::string line; std::getline(in, line);)
      if (line.find(" -> ") != std::string::npos && line.find("POST ") != std::string::npos) out += line + "\n";
    return out;
  }
};

std::vector<std::string> base_environment(const Session& s) {
  const char* path = std::getenv("PATH");
  return {"PATH=" + std::string(path ? path : "/usr/local/bin:/usr/bin:/bin"), "HOME=" + s.home.string(),
          "TERM=dumb"};
}

std::string describe(const ProcessResult& p) {
  return "exit " + std::to_string(p.exit_code) + (p.timed_out ? " (timed out)" : "") + " after " +
         std::to_string(p.seconds) + " s\n--- stdout ---\n" + p.out.substr(0, 20000) + "\n--- stderr ---\n" +
         p.err.substr(0, 8000);
}

// Codex CLI (npm @openai/codex) speaks only the Responses API. docs/clients.md has the same
// config.toml; `web_search` and the multi-agent tools are off because keel runs no hosted tools
// and serves function tools only.
TEST(ClientMatrix, CodexExecRunsAToolThroughTheResponsesApi) {
  const ClientInstall& install = client_install();
  if (!install.skip_reason.empty()) GTEST_SKIP() << install.skip_reason;
  ASSERT_TRUE(install.error.empty()) << install.error;

  Session s(R"({"name":"exec_command","arguments":{"cmd":"ls"}})");
  const auto codex_home = s.home / ".codex";
  std::filesystem::create_directories(codex_home);
  std::ofstream(codex_home / "config.toml") << "model = \"keel\"\n"
                                               "model_provider = \"keel\"\n"
                                               "approval_policy = \"never\"\n"
                                               "sandbox_mode = \"danger-full-access\"\n"
                                               "web_search = \"disabled\"\n"
                                               "[features]\n"
                                               "multi_agent = false\n"
                                               "[analytics]\n"
                                               "enabled = false\n"
                                               "[model_providers.keel]\n"
                                               "name = \"keel\"\n"
                                               "base_url = \""
                                            << s.base_url()
                                            << "\"\n"
                                               "wire_api = \"responses\"\n"
                                               "env_key = \"KEEL_API_KEY\"\n"
                                               "requires_openai_auth = false\n"
                                               "request_max_retries = 0\n"
                                               "stream_max_retries = 0\n";
  std::vector<std::string> env = base_environment(s);
  env.push_back("CODEX_HOME=" + codex_home.string());
  env.push_back("KEEL_API_KEY=local");
  const ProcessResult run = run_process(
      {(install.node_modules / ".bin" / "codex").string(), "exec", "--ephemeral", "--skip-git-repo-check",
       "--dangerously-bypass-approvals-and-sandbox", "--json", "--disable", "plugins", "List the files here."},
      env, s.project, std::chrono::seconds(300));
  std::cout << "codex exec: " << run.seconds << " s\n" << s.requests();
  ::testing::Test::RecordProperty("codex_seconds", std::to_string(run.seconds));

  bool ran_ls = false, listed = false, answered = false, completed = false;
  for (const json& e : json_lines(run.out)) {
    const std::string type = e.value("type", "");
    const json item = e.value("item", json::object());
    if (type == "item.completed" && item.value("type", "") == "command_execution") {
      ran_ls = item.value("command", "").find("ls") != std::string::npos;
      listed = item.value("aggregated_output", "").find(kDecomposedFile) != std::string::npos;
    }
    if (type == "item.completed" && item.value("type", "") == "agent_message") answered = item.value("text", "") == "Done";
    if (type == "turn.completed") completed = true;
  }
  EXPECT_EQ(run.exit_code, 0) << describe(run);
  EXPECT_TRUE(ran_ls) << "the exec_command call did not reach Codex\n" << describe(run);
  EXPECT_TRUE(listed) << "ls did not list " << kDecomposedFile << "\n" << describe(run);
  EXPECT_TRUE(answered) << describe(run);
  EXPECT_TRUE(completed) << describe(run);
  EXPECT_EQ(error_lines(s.server->log()), "") << s.server->log();
}

// Qwen Code (npm @qwen-code/qwen-code) on Chat Completions, configured by its documented
// environment variables, headless with -p's positional form and --yolo (no approval prompts).
TEST(ClientMatrix, QwenCodeRunsAToolThroughChatCompletions) {
  const ClientInstall& install = client_install();
  if (!install.skip_reason.empty()) GTEST_SKIP() << install.skip_reason;
  ASSERT_TRUE(install.error.empty()) << install.error;

  Session s(R"({"name":"run_shell_command","arguments":{"command":"ls"}})");
  std::vector<std::string> env = base_environment(s);
  env.push_back("OPENAI_BASE_URL=" + s.base_url());
  env.push_back("OPENAI_API_KEY=local");
  env.push_back("OPENAI_MODEL=keel");
  env.push_back("QWEN_CODE_SUPPRESS_YOLO_WARNING=1");
  ProcessResult run;
  bool called = false, listed = false, empty_output = false;
  json result;
  // Under load, Qwen Code's shell tool now and then reports a command's output as "(empty)": its
  // own race, after keel delivered the call (once in a full suite run, with another test beside
  // it; 4 runs of 4 passed alone). Such a session runs once more; the checks below read the last.
  for (int attempt = 0; attempt < 2 && (attempt == 0 || empty_output); ++attempt) {
    run = run_process({install.node.string(), (install.node_modules / ".bin" / "qwen").string(), "--yolo",
                       "--output-format", "stream-json", "List the files here."},
                      env, s.project, std::chrono::seconds(300));
    std::cout << "qwen: " << run.seconds << " s\n" << s.requests();
    ::testing::Test::RecordProperty("qwen_code_seconds", std::to_string(run.seconds));
    called = listed = empty_output = false;
    for (const json& e : json_lines(run.out)) {
      const std::string type = e.value("type", "");
      for (const json& block : e.value("message", json::object()).value("content", json::array())) {
        if (type == "assistant" && block.value("type", "") == "tool_use" && block.value("name", "") == "run_shell_command")
          called = true;
        if (type == "user" && block.value("type", "") == "tool_result" && !block.value("is_error", true)) {
          const std::string content = block.value("content", json("")).dump();
          listed = listed || content.find(kDecomposedFile) != std::string::npos;
          empty_output = empty_output || content.find("Output: (empty)") != std::string::npos;
        }
      }
      if (type == "result") result = e;
    }
    if (empty_output) std::cout << "qwen: the shell tool reported no output\n" << describe(run);
  }
  EXPECT_EQ(run.exit_code, 0) << describe(run);
  EXPECT_TRUE(called) << "the run_shell_command call did not reach Qwen Code\n" << describe(run);
  EXPECT_TRUE(listed) << "ls did not list " << kDecomposedFile << "\n" << describe(run);
  EXPECT_EQ(result.value("subtype", ""), "success") << describe(run);
  EXPECT_EQ(result.value("result", ""), "Done") << describe(run);
  EXPECT_EQ(error_lines(s.server->log()), "") << s.server->log();
}

// opencode (npm opencode-ai) on Chat Completions through its openai-compatible provider, set in
// ~/.config/opencode/opencode.json as docs/clients.md shows; `opencode run` is its headless mode.
TEST(ClientMatrix, OpencodeRunsAToolThroughChatCompletions) {
  const ClientInstall& install = client_install();
  if (!install.skip_reason.empty()) GTEST_SKIP() << install.skip_reason;
  ASSERT_TRUE(install.error.empty()) << install.error;

  // opencode's bash tool declares command, timeout and workdir only: a call with another key
  // would be redirected by the grammar (undeclared keys are closed to tool calls).
  Session s(R"({"name":"bash","arguments":{"command":"ls"}})");
  const auto config_dir = s.home / ".config" / "opencode";
  std::filesystem::create_directories(config_dir);
  const json config = {
      {"provider", {{"keel", {{"npm", "@ai-sdk/openai-compatible"}, {"name", "keel"},
                              {"options", {{"baseURL", s.base_url()}, {"apiKey", "local"}}},
                              {"models", {{"keel", {{"name", "keel"}, {"tool_call", true}}}}}}}}},
      {"model", "keel/keel"},
      {"autoupdate", false},
      {"share", "disabled"}};
  std::ofstream(config_dir / "opencode.json") << config.dump(2);
  std::vector<std::string> env = base_environment(s);
  env.push_back("OPENCODE_DISABLE_AUTOUPDATE=1");
  env.push_back("OPENCODE_DISABLE_MODELS_FETCH=1");
  const ProcessResult run = run_process(
      {(install.node_modules / ".bin" / "opencode").string(), "run", "--format", "json", "List the files here."}, env,
      s.project, std::chrono::seconds(300));
  std::cout << "opencode: " << run.seconds << " s\n" << s.requests();
  ::testing::Test::RecordProperty("opencode_seconds", std::to_string(run.seconds));

  bool listed = false, answered = false;
  for (const json& e : json_lines(run.out)) {
    const json part = e.value("part", json::object());
    if (e.value("type", "") == "tool_use" && part.value("tool", "") == "bash") {
      const json state = part.value("state", json::object());
      listed = state.value("status", "") == "completed" &&
               state.value("output", "").find(kDecomposedFile) != std::string::npos;
    }
    if (e.value("type", "") == "text" && part.value("text", "") == "Done") answered = true;
  }
  EXPECT_EQ(run.exit_code, 0) << describe(run);
  EXPECT_TRUE(listed) << "the bash call did not reach opencode or did not list " << kDecomposedFile << "\n"
                      << describe(run);
  EXPECT_TRUE(answered) << describe(run);
  EXPECT_EQ(error_lines(s.server->log()), "") << s.server->log();
}

}  // namespace
}  // namespace keel::test
