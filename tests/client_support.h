#pragma once
// Real clients for integration tests: the Node.js packages pinned in tests/clients/package-lock.json
// (Claude Code, @anthropic-ai/sdk, openai), installed by scripts/install-client-tests.sh into
// <build dir>/clients, and a way to run them as child processes with a deadline.
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "test_support.h"

namespace keel::test {

// The full path of `name` found on $PATH, if any.
std::optional<std::filesystem::path> find_on_path(const std::string& name);

// The client install, made once per process (the script is idempotent and serialises concurrent
// callers, so parallel test processes share one download). `skip_reason` is set when npm or node
// is not installed (tests skip); `error` holds the installer's output when it failed (tests fail).
struct ClientInstall {
  std::filesystem::path dir;           // <build dir>/clients
  std::filesystem::path node_modules;  // dir / "node_modules"
  std::filesystem::path node;          // the node binary
  std::string skip_reason;
  std::string error;
  double seconds = 0;  // time the installer took in this process
};
const ClientInstall& client_install();

// tests/clients in the source tree: the scripts the tests run with node.
std::filesystem::path client_scripts_dir();

// Runs argv[0] (a path) with exactly `env` as its environment, in `cwd`, stdin from /dev/null,
// in its own process group. After `timeout` the whole group is killed. Whatever the process
// group left behind (background children) is killed when the leader exits.
struct ProcessResult {
  int exit_code = -1;  // 128 + signal when killed
  bool timed_out = false;
  std::string out;
  std::string err;
  double seconds = 0;
};
ProcessResult run_process(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                          const std::filesystem::path& cwd, std::chrono::seconds timeout);

// A child process that runs until this object goes away (SIGTERM to its group, then SIGKILL),
// with stdout and stderr going to files one can read while it runs.
class BackgroundProcess {
 public:
  BackgroundProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env);
  ~BackgroundProcess();
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;

  std::string out() const;
  std::string err() const;
  bool running() const;
  // Waits until stdout holds a line starting with `prefix`; returns the rest of that line.
  std::string wait_for_line(const std::string& prefix, std::chrono::seconds timeout) const;

 private:
  TempDir dir_;
  int pid_ = -1;
};

// keel serve's log lines for 4xx/5xx answers ("keel serve: <request id> METHOD PATH -> 404:
// reason"), one per line; empty when there were none.
std::string error_lines(const std::string& log);

}  // namespace keel::test
