#include "keel/api/request_capture.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace keel::api {
namespace {

std::atomic<uint64_t> g_captured{0};
std::atomic<bool> g_warned{false};

bool write_file(const std::filesystem::path& path, const std::string& body) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < body.size()) {
    const ssize_t n = ::write(fd, body.data() + done, body.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  return ::close(fd) == 0 && done == body.size();
}

}  // namespace

void capture_request(const std::filesystem::path& dir, std::string_view route, const std::string& body) {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  const uint64_t n = ++g_captured;
  const std::string name = std::string(stamp) + "-" + std::to_string(n) + "-" + std::string(route) + ".json";
  std::error_code ec;
  if (std::filesystem::create_directories(dir, ec))
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
  const std::filesystem::path temp = dir / ("." + name + ".tmp"), path = dir / name;
  if (write_file(temp, body) && ::rename(temp.c_str(), path.c_str()) == 0) return;
  std::filesystem::remove(temp, ec);
  if (!g_warned.exchange(true))
    std::fprintf(stderr, "keel serve: --capture-requests: cannot write %s: %s (requests are served, not saved)\n",
                 path.c_str(), std::strerror(errno));
}

}  // namespace keel::api
