#pragma once
// Paths the tests need: the repository, the shared fixtures folder (../shared next to the checkout,
// or $KEEL_SHARED_DIR), and the built keel binary.
#include <sys/types.h>

#include <cstdint>
#include <ctime>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace keel::test {

std::filesystem::path source_dir();
std::filesystem::path shared_dir();
std::filesystem::path keel_binary();
// An unsanitized keel configured with -DKEEL_RELEASE_BINARY (scripts/test.sh passes build/keel), or
// an empty path.
std::filesystem::path release_binary();
std::string read_text(const std::filesystem::path& path);

// n floats drawn from the standard normal distribution by mt19937(seed): the kernels' test inputs.
std::vector<float> normal_floats(int64_t n, uint32_t seed);

// Writes a safetensors file: 8-byte little-endian header length, the header JSON text, the data.
void write_safetensors(const std::filesystem::path& path, const std::string& header_json, std::string_view data);

// A calendar time in UTC with its weekday and day of year filled in (for injectable clocks).
std::tm utc_time(int year, int month, int day, int hour, int minute, int second);

// A fresh empty directory under the system temp dir, removed when the object goes away.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Runs a shell command, returning its exit code and its stdout, with stderr merged in unless
// `merge_stderr` is false (then stderr is discarded).
struct CommandResult {
  int exit_code;
  std::string output;
};
CommandResult run_command(const std::string& command, bool merge_stderr = true);

// The environment of this process as NAME=value strings, and the same with `overrides` (NAME=value)
// put over it, for a child's environment.
std::vector<std::string> current_environment();
std::vector<std::string> environment_with(const std::vector<std::string>& overrides);

// Starts argv (argv[0] a path) in a new process group of its own, with `env` as its whole
// environment, stdin from /dev/null, stdout to `out` and stderr to `err` (both to one file when
// they are the same path), in `cwd` when given. Throws when it cannot start.
pid_t spawn_process(std::vector<std::string> argv, std::vector<std::string> env, const std::filesystem::path& out,
                    const std::filesystem::path& err, const std::filesystem::path* cwd = nullptr);

}  // namespace keel::test
