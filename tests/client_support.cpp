#include "client_support.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace keel::test {
namespace {

using Clock = std::chrono::steady_clock;

std::string read_file_or_empty(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace

std::optional<std::filesystem::path> find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (!path) return std::nullopt;
  std::istringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    const auto candidate = std::filesystem::path(dir) / name;
    if (access(candidate.c_str(), X_OK) == 0 && std::filesystem::is_regular_file(candidate)) return candidate;
  }
  return std::nullopt;
}

std::string error_lines(const std::string& log) {
  std::string out;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find(" -> ");
    if (at == std::string::npos || line.size() < at + 8) continue;
    const std::string code = line.substr(at + 4, 4);
    if ((code[0] == '4' || code[0] == '5') && std::isdigit(static_cast<unsigned char>(code[1])) &&
        std::isdigit(static_cast<unsigned char>(code[2])) && code[3] == ':')
      out += line + "\n";
  }
  return out;
}

std::filesystem::path client_scripts_dir() { return source_dir() / "tests" / "clients"; }

const ClientInstall& client_install() {
  static const ClientInstall install = [] {
    ClientInstall r;
    r.dir = keel_binary().parent_path() / "clients";
    r.node_modules = r.dir / "node_modules";
    const auto npm = find_on_path("npm");
    const auto node = find_on_path("node");
    if (!npm || !node) {
      r.skip_reason = "npm and node are needed for the client tests and are not on PATH "
                      "(scripts/install-deps.sh installs the Debian nodejs and npm packages)";
      return r;
    }
    r.node = *node;
    const ProcessResult p = run_process({"/bin/bash", (source_dir() / "scripts" / "install-client-tests.sh").string(),
                                         r.dir.string()},
                                        current_environment(), source_dir(), std::chrono::seconds(540));
    r.seconds = p.seconds;
    if (p.exit_code == 3) {
      r.skip_reason = "install-client-tests.sh: npm not found: " + p.err;
    } else if (p.exit_code != 0) {
      r.error = "scripts/install-client-tests.sh " + r.dir.string() + " failed (exit " + std::to_string(p.exit_code) +
                (p.timed_out ? ", timed out" : "") + "):\n" + p.out + p.err;
    }
    return r;
  }();
  return install;
}

ProcessResult run_process(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                          const std::filesystem::path& cwd, std::chrono::seconds timeout) {
  TempDir io;
  const auto out = io.path() / "stdout";
  const auto err = io.path() / "stderr";
  const auto start = Clock::now();
  const int pid = spawn_process(argv, env, out, err, &cwd);
  ProcessResult r;
  int status = 0;
  for (;;) {
    const int w = waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      r.exit_code = exit_code_of(status);
      break;
    }
    if (Clock::now() - start > timeout) {
      r.timed_out = true;
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      r.exit_code = exit_code_of(status);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(-pid, SIGKILL);  // anything the process left running in its group
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.out = read_file_or_empty(out);
  r.err = read_file_or_empty(err);
  return r;
}

BackgroundProcess::BackgroundProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  pid_ = spawn_process(argv, env, dir_.path() / "stdout", dir_.path() / "stderr");
}

BackgroundProcess::~BackgroundProcess() {
  if (pid_ <= 0) return;
  kill(-pid_, SIGTERM);
  int status = 0;
  for (int i = 0; i < 200; ++i) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      kill(-pid_, SIGKILL);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(-pid_, SIGKILL);
  waitpid(pid_, &status, 0);
}

std::string BackgroundProcess::out() const { return read_file_or_empty(dir_.path() / "stdout"); }
std::string BackgroundProcess::err() const { return read_file_or_empty(dir_.path() / "stderr"); }

bool BackgroundProcess::running() const {
  int status = 0;
  return waitpid(pid_, &status, WNOHANG) == 0;
}

std::string BackgroundProcess::wait_for_line(const std::string& prefix, std::chrono::seconds timeout) const {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    std::istringstream lines(out());
    for (std::string line; std::getline(lines, line);)
      if (line.rfind(prefix, 0) == 0 && !lines.eof()) return line.substr(prefix.size());
    if (!running()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  throw std::runtime_error("no line starting with \"" + prefix + "\" on stdout; stdout:\n" + out() + "\nstderr:\n" + err());
}

}  // namespace keel::test
