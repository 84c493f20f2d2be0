// SIGTERM drains `keel serve` (issue #16): it stops taking connections, a running stream gets the
// grace period and then ends with an error event, a request still waiting gets a 503, the log
// says so, and the process exits 0. A second signal stops it at once.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <csignal>
#include <future>
#include <string>
#include <thread>

#include "server_support.h"

namespace keel::test {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::ordered_json;

int connect_to(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const sockaddr_in addr = loopback_address(port);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  timeval tv{60, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// A chat request over its own connection, read to the end on another thread. `started` is set
// once the first bytes of the answer arrived.
struct OpenRequest {
  OpenRequest(int port, const std::string& path, const json& body) {
    fd = connect_to(port);
    const std::string text = body.dump();
    const std::string message = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                "Connection: close\r\nContent-Length: " + std::to_string(text.size()) + "\r\n\r\n" + text;
    send(fd, message.data(), message.size(), MSG_NOSIGNAL);
    answer = std::async(std::launch::async, [this] {
      std::string got;
      char buf[4096];
      for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) {
        got.append(buf, static_cast<size_t>(n));
        started = true;
      }
      return got;
    });
  }
  ~OpenRequest() { close(fd); }
  int fd;
  std::atomic<bool> started{false};
  std::future<std::string> answer;
};

// Greedy: random weights then never pick the end of the turn, so the stream runs to max_tokens
// (a sampled one may end after a few hundred tokens).
json anthropic_request(int max_tokens, bool stream) {
  return {{"model", "random-talker"}, {"max_tokens", max_tokens}, {"stream", stream}, {"temperature", 0},
          {"messages", {{{"role", "user"}, {"content", "Tell me about rivers."}}}}};
}

TEST(ReliabilityShutdown, SigtermLetsTheStreamEndCleanlyAndExitsZero) {
  TempDir dir;
  // One turn at a time, so the second request waits for the engine.
  ServerProcess server({"--model", random_talker(dir).string(), "--shutdown-grace", "1", "--parallel", "1"});
  // A stream that would run far past the grace period, and a request waiting behind it.
  OpenRequest stream(server.port(), "/v1/messages", anthropic_request(20000, true));
  for (int i = 0; i < 1000 && !stream.started; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(stream.started);
  OpenRequest waiting(server.port(), "/v1/chat/completions",
                      {{"model", "random-talker"}, {"max_tokens", 50}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  std::this_thread::sleep_for(300ms);

  const auto start = std::chrono::steady_clock::now();
  const int status = server.signal_and_wait(SIGTERM, 20s);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(status, 0) << server.log();
  // The grace period, then at most a decode step and the closing writes.
  EXPECT_GE(took, 900ms);
  EXPECT_LT(took, 10s);

  const std::string streamed = stream.answer.get();
  EXPECT_NE(streamed.find("HTTP/1.1 200"), std::string::npos) << streamed.substr(0, 300);
  const size_t error_event = streamed.find("event: error");
  ASSERT_NE(error_event, std::string::npos) << streamed.substr(streamed.size() > 600 ? streamed.size() - 600 : 0);
  EXPECT_NE(streamed.find("shutting down", error_event), std::string::npos);
  EXPECT_EQ(streamed.find("event: message_stop"), std::string::npos);  // cut short, not finished
  EXPECT_NE(streamed.find("\r\n0\r\n\r\n"), std::string::npos);        // the chunked body ends properly

  const std::string refused = waiting.answer.get();
  EXPECT_EQ(refused.rfind("HTTP/1.1 503", 0), 0u) << refused;
  EXPECT_NE(refused.find("shutting down"), std::string::npos) << refused;
  EXPECT_NE(refused.find("\r\nRetry-After: 2\r\n"), std::string::npos) << refused;

  const std::string log = server.log();
  EXPECT_NE(log.find("terminated: no new connections"), std::string::npos) << log;
  EXPECT_NE(log.find("keel serve: stopped"), std::string::npos) << log;
  EXPECT_EQ(log.find(" 500"), std::string::npos) << log;
}

TEST(ReliabilityShutdown, AnIdleServerStopsAtOnceAndRefusesNewConnections) {
  ServerProcess server;
  auto client = server.client();
  ASSERT_EQ(client.Get("/health")->status, 200);  // a kept-alive connection, now idle
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(server.signal_and_wait(SIGINT, 10s), 0) << server.log();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_EQ(connect_to(server.port()), -1);
}

TEST(ReliabilityShutdown, ASecondSignalStopsAtOnce) {
  TempDir dir;
  ServerProcess server({"--model", random_talker(dir).string(), "--shutdown-grace", "600"});
  OpenRequest stream(server.port(), "/v1/messages", anthropic_request(20000, true));
  for (int i = 0; i < 1000 && !stream.started; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(stream.started);
  EXPECT_EQ(server.signal_and_wait(SIGTERM, 500ms), -1);  // draining: the stream has 600 s
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(server.signal_and_wait(SIGTERM, 10s), 0) << server.log();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_NE(server.log().find("second signal"), std::string::npos);
}

}  // namespace
}  // namespace keel::test
