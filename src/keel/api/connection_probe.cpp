#include "keel/api/connection_probe.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace keel::api {
namespace {

// Port and textual address of a socket name (IPv4 or IPv6).
bool describe(const sockaddr_storage& sa, std::string& addr, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (sa.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(sa);
    if (!inet_ntop(AF_INET, &in.sin_addr, text, sizeof text)) return false;
    port = ntohs(in.sin_port);
  } else if (sa.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(sa);
    if (!inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text)) return false;
    port = ntohs(in6.sin6_port);
  } else {
    return false;
  }
  addr = text;
  return true;
}

bool endpoint_is(int fd, bool peer, const std::string& want_addr, int want_port) {
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  const int rc = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len)
                      : getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  std::string addr;
  int port = -1;
  if (rc != 0 || !describe(sa, addr, port)) return false;
  return port == want_port && (want_addr.empty() || addr == want_addr);
}

}  // namespace

ConnectionProbe::ConnectionProbe(const std::string& local_addr, int local_port, const std::string& remote_addr,
                                 int remote_port) {
  if (local_port <= 0 || remote_port <= 0) return;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return;
  while (const dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    struct stat st {};
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    if (endpoint_is(static_cast<int>(fd), true, remote_addr, remote_port) &&
        endpoint_is(static_cast<int>(fd), false, local_addr, local_port)) {
      fd_ = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
}

bool ConnectionProbe::client_gone() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return true;
  if (!(p.revents & POLLIN)) return false;
  char byte;
  const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace keel::api
