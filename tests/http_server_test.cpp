// The HTTP server on its own (http/http_server.h), driven over plain sockets the way careless
// and hostile clients drive it (issue #16): idle and slowloris connections do not stop other
// clients, every read has a total deadline, size limits hold before a body is read, pipelined
// requests are answered in order, a connection flood is refused at once, streams go out as
// chunks, and a handler learns that its client has gone.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "keel/http/http_server.h"

namespace keel::http {
namespace {

using namespace std::chrono_literals;

// A server on a free loopback port, run on its own thread. Routes: GET /health, POST /echo
// (echoes the body), GET /stream (three chunks), GET /wait-for-hangup (returns once the client
// has gone, or after 10 s), POST /half-second (answers after half a second). Every path under
// /locked/ is refused 401 by its own rule, on the head, and before any refusal of the HTTP layer.
class TestServer {
 public:
  explicit TestServer(Limits limits = {}) {
    server_ = std::make_unique<Server>(
        limits, [this](const Request& req, Response& res) { handle(req, res); },
        [](const Request& req, int status, const std::string& why, Response& res) {
          if (locked(req, res)) return;
          res.set_content("refused " + std::to_string(status) + ": " + why, "text/plain");
        },
        [](const Request& head, Response& res) { return locked(head, res); });
    port_ = server_->listen("127.0.0.1", 0);
    thread_ = std::thread([this] { server_->run(); });
  }
  ~TestServer() {
    server_->stop();
    thread_.join();
  }
  int port() const { return port_; }
  Server& server() { return *server_; }
  std::atomic<int> hangups_seen{0};

 private:
  static bool locked(const Request& req, Response& res) {
    if (!req.path.starts_with("/locked/")) return false;
    res.status = 401;
    res.set_content("locked", "text/plain");
    return true;
  }

  void handle(const Request& req, Response& res) {
    if (req.path == "/health") {
      res.set_content("ok", "text/plain");
    } else if (req.path == "/echo") {
      res.set_content(req.method + " " + req.body, "text/plain");
    } else if (req.path == "/stream") {
      res.set_header("Content-Type", "text/event-stream");
      res.stream = [](ChunkSink& sink) {
        for (const char* part : {"one\n", "two\n", "three\n"})
          if (!sink.write(part)) return;
      };
    } else if (req.path == "/wait-for-hangup") {
      const auto until = std::chrono::steady_clock::now() + 10s;
      while (!req.client_gone() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(10ms);
      if (req.client_gone()) ++hangups_seen;
      res.set_content("late", "text/plain");
    } else if (req.path == "/half-second") {
      std::this_thread::sleep_for(500ms);
      res.set_content(req.client_gone() ? "gone" : "done", "text/plain");
    } else {
      res.status = 404;
      res.set_content("no route", "text/plain");
    }
  }

  std::unique_ptr<Server> server_;
  int port_ = 0;
  std::thread thread_;
};

// A loopback connection whose reads give up after `timeout`.
int connect_to(int port, std::chrono::milliseconds timeout = 5000ms) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    throw std::runtime_error("connect failed: " + std::string(strerror(errno)));
  timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

void send_text(int fd, const std::string& text) {
  size_t sent = 0;
  while (sent < text.size()) {
    const ssize_t n = send(fd, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;  // the server closed: what it answered is still readable
    sent += static_cast<size_t>(n);
  }
}

// Everything until the server closes (or the read timeout passes).
std::string read_all(int fd) {
  std::string got;
  char buf[8192];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) got.append(buf, static_cast<size_t>(n));
  return got;
}

// Whether the server has closed the connection: end of stream or a reset, rather than the read
// timeout passing with the connection still open.
bool closed_by_server(int fd) {
  char buf[4096];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n == 0) return true;
    if (n < 0) return errno == ECONNRESET;
  }
}

// Sends `request` on a new connection and reads until the server closes it.
std::string exchange(int port, const std::string& request) {
  const int fd = connect_to(port);
  send_text(fd, request);
  const std::string got = read_all(fd);
  close(fd);
  return got;
}

int status_of(const std::string& response) {
  return response.rfind("HTTP/1.1 ", 0) == 0 ? std::stoi(response.substr(9, 3)) : 0;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

const std::string kHealth = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

std::string post(const std::string& body, const std::string& extra_headers = "") {
  return "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra_headers +
         "\r\n" + body;
}

// Enough descriptors for the connection counts below (both ends live in this process).
size_t raise_descriptor_limit() {
  rlimit r{};
  getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;
  setrlimit(RLIMIT_NOFILE, &r);
  getrlimit(RLIMIT_NOFILE, &r);
  return static_cast<size_t>(r.rlim_cur);
}

TEST(ReliabilityHttp, AnswersKeepsAliveAndAnswersPipelinedRequestsInOrder) {
  TestServer server;
  const std::string got = exchange(server.port(), post("first") + post("second") + "HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n" +
                                                      post("third", "Connection: close\r\n"));
  EXPECT_EQ(count(got, "HTTP/1.1 200"), 4u) << got;
  const size_t a = got.find("POST first"), b = got.find("POST second"), c = got.find("POST third");
  ASSERT_NE(a, std::string::npos);
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(c, std::string::npos);
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  // HEAD: the GET's head (its length) and no body.
  EXPECT_EQ(count(got, "\r\nok"), 0u) << got;
  EXPECT_NE(got.find("Content-Length: 2\r\n"), std::string::npos);
  // Paths arrive percent-decoded (a model id with a slash is sent as %2F).
  EXPECT_EQ(status_of(exchange(server.port(), "GET /he%61lth HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")), 200);
}

TEST(ReliabilityHttp, BodyAndHeaderLimitsHoldBeforeTheBodyIsRead) {
  Limits limits;
  limits.max_body_bytes = 1000;
  limits.max_header_count = 20;
  limits.max_header_bytes = 4096;
  TestServer server(limits);
  // A declared length over the limit: 413 without sending a byte of the body.
  EXPECT_EQ(status_of(exchange(server.port(), "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5000000\r\n\r\n")), 413);
  // A chunked body that passes the limit.
  std::string chunked = "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 20; ++i) chunked += "64\r\n" + std::string(100, 'a') + "\r\n";
  EXPECT_EQ(status_of(exchange(server.port(), chunked + "0\r\n\r\n")), 413);
  // Within the limit, chunked is read whole.
  const std::string small = exchange(server.port(), "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                                                    "Connection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
  EXPECT_EQ(status_of(small), 200);
  EXPECT_NE(small.find("POST hello"), std::string::npos);
  // Lengths that are not one number.
  for (const char* length : {"-5", "abc", "5, 6", "99999999999999999999999"})
    EXPECT_EQ(status_of(exchange(server.port(), "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                                                     std::string(length) + "\r\n\r\nhello")), 400) << length;
  EXPECT_EQ(status_of(exchange(server.port(), "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                                              "Content-Length: 6\r\n\r\nhello!")), 400);
  // A POST with no length at all: 411 at once, not a wait for a body.
  EXPECT_EQ(status_of(exchange(server.port(), "POST /echo HTTP/1.1\r\nHost: x\r\n\r\n")), 411);
  // Too many headers, or too many header bytes.
  std::string many = "GET /health HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 30; ++i) many += "X-" + std::to_string(i) + ": y\r\n";
  EXPECT_EQ(status_of(exchange(server.port(), many + "\r\n")), 431);
  EXPECT_EQ(status_of(exchange(server.port(), "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(8000, 'b') +
                                                  "\r\n\r\n")), 431);
  // TLS on the plain port: an answer or a close, at once.
  const std::string client_hello("\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03", 11);
  const auto start = std::chrono::steady_clock::now();
  const std::string tls = exchange(server.port(), client_hello + std::string(160, '\x01'));
  EXPECT_TRUE(tls.empty() || status_of(tls) == 400) << tls;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
  // After all that, the server still answers.
  EXPECT_EQ(status_of(exchange(server.port(), kHealth)), 200);
}

TEST(ReliabilityHttp, IdleAndSlowConnectionsDoNotStopOtherClients) {
  const size_t fds = raise_descriptor_limit();
  // Both ends of every connection are in this process: 2 descriptors each, plus a margin.
  const size_t idle = std::min<size_t>(1000, (fds - 200) / 2 * 5 / 6), slow = std::min<size_t>(200, (fds - 200) / 2 / 6);
  Limits limits;
  limits.head_deadline = 3000ms;
  limits.workers = 4;
  TestServer server(limits);
  // Kept-alive connections that asked once and then say nothing.
  std::vector<int> open;
  for (size_t i = 0; i < idle; ++i) {
    open.push_back(connect_to(server.port()));
    send_text(open.back(), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    std::string got;
    char buf[1024];
    while (got.find("\r\n\r\nok") == std::string::npos) {
      const ssize_t n = recv(open.back(), buf, sizeof buf, 0);
      ASSERT_GT(n, 0) << "idle connection " << i;
      got.append(buf, static_cast<size_t>(n));
    }
  }
  // Slowloris: a request head that never ends, a byte at a time.
  std::vector<int> slowloris;
  for (size_t i = 0; i < slow; ++i) {
    slowloris.push_back(connect_to(server.port(), 1000ms));
    send_text(slowloris.back(), "GET /health HTTP/1.1\r\nX-Slow: ");
  }
  for (int round = 0; round < 3; ++round) {
    for (int fd : slowloris) send_text(fd, "a");
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(status_of(exchange(server.port(), kHealth)), 200) << "round " << round;
    EXPECT_EQ(status_of(exchange(server.port(), post("normal", "Connection: close\r\n"))), 200);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2s) << "round " << round;
    std::this_thread::sleep_for(500ms);
  }
  EXPECT_GE(server.server().open_connections(), idle + slow);
  // The head deadline closes the slow ones, however steadily they trickle; the idle ones stay.
  std::this_thread::sleep_for(2500ms);
  size_t closed = 0;
  for (int fd : slowloris) {
    send_text(fd, "a");
    closed += closed_by_server(fd);
    close(fd);
  }
  EXPECT_EQ(closed, slow);
  EXPECT_GE(server.server().open_connections(), idle);
  for (int fd : open) close(fd);
}

TEST(ReliabilityHttp, ConnectionsBeyondTheCapAreRefusedAtOnce) {
  Limits limits;
  limits.max_connections = 20;
  TestServer server(limits);
  std::vector<int> held;
  for (int i = 0; i < 20; ++i) held.push_back(connect_to(server.port()));
  // Let the server take them all before the next one arrives.
  for (int i = 0; i < 100 && server.server().open_connections() < 20; ++i) std::this_thread::sleep_for(10ms);
  const auto start = std::chrono::steady_clock::now();
  const std::string refused = exchange(server.port(), kHealth);
  EXPECT_EQ(status_of(refused), 503) << refused;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  for (int fd : held) close(fd);
  for (int i = 0; i < 100 && server.server().open_connections() > 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(status_of(exchange(server.port(), kHealth)), 200);
}

TEST(ReliabilityHttp, StreamsGoOutAsChunksAndAHandlerSeesItsClientLeave) {
  TestServer server;
  const std::string streamed = exchange(server.port(), "GET /stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_NE(streamed.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << streamed;
  EXPECT_NE(streamed.find("\r\n4\r\none\n\r\n4\r\ntwo\n\r\n6\r\nthree\n\r\n0\r\n\r\n"), std::string::npos) << streamed;
  // A client that sends a request and hangs up before the answer.
  const int fd = connect_to(server.port());
  send_text(fd, "GET /wait-for-hangup HTTP/1.1\r\nHost: x\r\n\r\n");
  std::this_thread::sleep_for(100ms);
  close(fd);
  for (int i = 0; i < 300 && server.hangups_seen == 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(server.hangups_seen, 1);
}

// Bytes sent after the request (a pipelined request, a stray CRLF) must not hide the hang-up.
TEST(ReliabilityHttp, AHandlerSeesItsClientLeaveAfterSendingMore) {
  TestServer server;
  int expected = 0;
  for (const std::string& more : {std::string("\r\n"), kHealth, std::string("GET /hea")}) {
    const int fd = connect_to(server.port());
    send_text(fd, "GET /wait-for-hangup HTTP/1.1\r\nHost: x\r\n\r\n" + more);
    std::this_thread::sleep_for(100ms);
    close(fd);
    ++expected;
    for (int i = 0; i < 300 && server.hangups_seen < expected; ++i) std::this_thread::sleep_for(10ms);
    EXPECT_EQ(server.hangups_seen, expected) << "after sending " << more.size() << " more bytes";
  }
}

// A client that shuts its sending side after the request still waits for the answer.
TEST(ReliabilityHttp, AHalfClosedClientGetsItsAnswer) {
  TestServer server;
  const int fd = connect_to(server.port());
  send_text(fd, "POST /half-second HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi");
  shutdown(fd, SHUT_WR);
  const std::string got = read_all(fd);
  close(fd);
  // An interim 100 may come first: that is how the server tells a half-close from a hang-up.
  const size_t final_answer = got.find("HTTP/1.1 200");
  ASSERT_NE(final_answer, std::string::npos) << got;
  EXPECT_TRUE(final_answer == 0 || got.rfind("HTTP/1.1 100 Continue\r\n\r\n", 0) == 0) << got;
  EXPECT_NE(got.find("\r\n\r\ndone"), std::string::npos) << got;
  // Two pipelined requests, then the half-close: both are answered, and the connection closes
  // once nothing more can come (not at the idle timeout).
  const auto start = std::chrono::steady_clock::now();
  const int two = connect_to(server.port());
  const std::string request = "POST /half-second HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi";
  send_text(two, request + request);
  shutdown(two, SHUT_WR);
  const std::string both = read_all(two);
  close(two);
  EXPECT_EQ(count(both, "\r\n\r\ndone"), 2u) << both;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s) << "the connection stayed open after the last answer";
}

// A head or a body that does not arrive in time is answered 408 before the connection closes.
TEST(ReliabilityHttp, ASlowHeadOrBodyIsAnswered408) {
  Limits limits;
  limits.head_deadline = 300ms;
  limits.body_deadline = 300ms;
  TestServer server(limits);
  for (const std::string& partial : {std::string("GET /health HTTP/1.1\r\nHost: x\r\n"),
                                    post("the whole body").substr(0, 60)}) {
    const int fd = connect_to(server.port());
    send_text(fd, partial);
    const std::string got = read_all(fd);
    close(fd);
    EXPECT_EQ(status_of(got), 408) << partial << "\n" << got;
  }
}

TEST(ReliabilityHttp, CodingsItCannotDecodeAreRefused) {
  TestServer server;
  const std::string chunked_hello = "\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
  EXPECT_EQ(status_of(exchange(server.port(), "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked" +
                                                  chunked_hello)), 501);
  // Chunked twice: malformed framing, which the parser refuses (400) before the coding check.
  EXPECT_EQ(status_of(exchange(server.port(), "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                                              "Transfer-Encoding: chunked" + chunked_hello)), 400);
  EXPECT_EQ(status_of(exchange(server.port(), post("hello", "Content-Encoding: gzip\r\n"))), 415);
  EXPECT_EQ(status_of(exchange(server.port(), post("hello", "Content-Encoding: identity\r\nConnection: close\r\n"))), 200);
  EXPECT_EQ(status_of(exchange(server.port(), "POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                              "Transfer-Encoding: Chunked" + chunked_hello)), 200);
}

// The handler's own rule answers before the body is read, and a refusal of the HTTP layer (431
// here) carries that rule's status with its body, not another's.
TEST(ReliabilityHttp, AHeadRefusedBeforeItsBodyKeepsItsStatus) {
  TestServer server;
  const auto start = std::chrono::steady_clock::now();
  const std::string refused = exchange(server.port(), "POST /locked/x HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n");
  EXPECT_EQ(status_of(refused), 401) << refused;
  EXPECT_NE(refused.find("\r\n\r\nlocked"), std::string::npos) << refused;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s) << "answered without waiting for the body";
  std::string many = "GET /locked/x HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 200; ++i) many += "X-" + std::to_string(i) + ": y\r\n";
  const std::string too_many = exchange(server.port(), many + "\r\n");
  EXPECT_EQ(status_of(too_many), 401) << too_many;
  EXPECT_NE(too_many.find("\r\n\r\nlocked"), std::string::npos) << too_many;
}

// Uploads still in progress hold at most max_body_bytes_in_flight between them.
TEST(ReliabilityHttp, BodiesInFlightAreBounded) {
  Limits limits;
  limits.max_body_bytes = 1 << 20;
  limits.max_body_bytes_in_flight = 2 << 20;
  TestServer server(limits);
  const std::string head = "POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: " +
                           std::to_string(limits.max_body_bytes) + "\r\n\r\n";
  std::vector<int> stalled;
  for (int i = 0; i < 2; ++i) {
    stalled.push_back(connect_to(server.port()));
    send_text(stalled.back(), head + "partial");
  }
  // Once the server has read both heads (it may take a moment on a loaded machine), a third is refused.
  std::string refused;
  for (int i = 0; i < 50 && status_of(refused) != 503; ++i) {
    std::this_thread::sleep_for(100ms);
    refused = exchange(server.port(), head + std::string(limits.max_body_bytes, 'a'));
  }
  EXPECT_EQ(status_of(refused), 503) << refused.substr(0, 300);
  EXPECT_NE(refused.find("other request bodies"), std::string::npos) << refused.substr(0, 300);
  EXPECT_EQ(status_of(exchange(server.port(), kHealth)), 200) << "a request without a body still passes";
  // Once one upload completes, its share is free for the next.
  send_text(stalled[0], std::string(limits.max_body_bytes - 7, 'a'));
  EXPECT_EQ(status_of(read_all(stalled[0])), 200);
  EXPECT_EQ(status_of(exchange(server.port(), head + std::string(limits.max_body_bytes, 'a'))), 200);
  for (int fd : stalled) close(fd);
}

TEST(ReliabilityHttp, StopAcceptingLetsTheRunningRequestFinish) {
  TestServer server;
  const int fd = connect_to(server.port());
  send_text(fd, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  const int idle = connect_to(server.port());
  std::this_thread::sleep_for(100ms);
  server.server().stop_accepting();
  const std::string got = read_all(fd);  // the stream ends, then the connection closes
  EXPECT_NE(got.find("0\r\n\r\n"), std::string::npos) << got;
  EXPECT_EQ(read_all(idle), "");  // closed without an answer
  close(fd);
  close(idle);
}

}  // namespace
}  // namespace keel::http
