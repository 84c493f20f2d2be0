#include "server_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "keel/text/tokenizer.h"

extern char** environ;

namespace keel::test {

std::filesystem::path tiny_toolcaller_dir() { return source_dir() / "models" / "tiny-toolcaller"; }

std::string prose(size_t tokens) {
  static const text::Tokenizer tok = text::Tokenizer::from_file(tiny_toolcaller_dir());
  std::string text;
  const std::string sentence = "The river runs past the old mill and the children count the boats. ";
  const size_t per_sentence = tok.encode(sentence).size();
  while (text.size() / sentence.size() * per_sentence < tokens) text += sentence;
  return text;
}

const nlohmann::ordered_json& session_fixture() {
  static const nlohmann::ordered_json session =
      nlohmann::ordered_json::parse(read_text(shared_dir() / "fixtures/golden/tiny-toolcaller.session.json"));
  return session;
}

ServerProcess::ServerProcess(std::vector<std::string> args) {
  bool has_model = false, has_port = false;
  for (const auto& a : args) {
    has_model |= a == "--model";
    has_port |= a == "--port";
  }
  std::vector<std::string> argv = {keel_binary().string(), "serve"};
  if (!has_model) argv.insert(argv.end(), {"--model", tiny_toolcaller_dir().string()});
  if (!has_port) argv.insert(argv.end(), {"--port", "0"});
  argv.insert(argv.end(), {"--threads", "2"});
  argv.insert(argv.end(), args.begin(), args.end());

  const std::string log_path = (dir_.path() / "serve.log").string();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const int rc = posix_spawn(&pid_, cargv[0], &actions, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start keel serve");

  // The server logs the port it bound once it is ready to accept connections.
  const std::string listening = "listening on http://127.0.0.1:";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string text = log();
    const size_t at = text.find(listening);
    if (at != std::string::npos && text.find('\n', at) != std::string::npos) {
      port_ = std::stoi(text.substr(at + listening.size()));
      return;
    }
    if (!running()) throw std::runtime_error("keel serve exited at start:\n" + text);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  throw std::runtime_error("keel serve did not start in time:\n" + log());
}

ServerProcess::~ServerProcess() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  int status = 0;
  for (int i = 0; i < 500; ++i) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, &status, 0);
}

bool ServerProcess::running() const {
  int status = 0;
  return waitpid(pid_, &status, WNOHANG) == 0;
}

std::string ServerProcess::log() const {
  std::ifstream in(dir_.path() / "serve.log");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

httplib::Client ServerProcess::client(std::chrono::seconds timeout) const {
  httplib::Client c("127.0.0.1", port_);
  c.set_read_timeout(timeout);
  c.set_write_timeout(timeout);
  c.set_connection_timeout(std::chrono::seconds(10));
  return c;
}

std::vector<SseEvent> parse_sse(const std::string& body) {
  std::vector<SseEvent> events;
  SseEvent current;
  bool any = false;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) {
      if (any) events.push_back(current);
      current = {};
      any = false;
    } else if (line.rfind("event: ", 0) == 0) {
      current.event = line.substr(7);
      any = true;
    } else if (line.rfind("data: ", 0) == 0) {
      current.data += line.substr(6);
      any = true;
    }
  }
  if (any) events.push_back(current);
  return events;
}

JsonResponse post_json(httplib::Client& client, const std::string& path, const nlohmann::ordered_json& body,
                       const httplib::Headers& headers) {
  JsonResponse out;
  auto res = client.Post(path, headers, body.dump(), "application/json");
  if (!res) throw std::runtime_error("POST " + path + " failed: " + httplib::to_string(res.error()));
  out.status = res->status;
  out.text = res->body;
  out.headers = res->headers;
  out.body = nlohmann::ordered_json::parse(res->body, nullptr, false);
  if (out.body.is_discarded()) out.body = nullptr;
  return out;
}

std::filesystem::path random_talker(const TempDir& dir) {
  const auto out = dir.path() / "random-talker";
  const auto src = tiny_toolcaller_dir();
  const CommandResult r = run_command(keel_binary().string() + " synth --config " + (src / "config.json").string() +
                                      " --dtype bf16 --out " + out.string());
  if (r.exit_code != 0) throw std::runtime_error(r.output);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) std::filesystem::copy_file(src / f, out / f);
  return out;
}

namespace {

// A TCP connection to 127.0.0.1:port (throws when it cannot be made).
int connect_loopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    throw std::runtime_error("connect failed");
  }
  return fd;
}

// Sends as much of `data` as the peer takes.
void send_all(int fd, const std::string& data) {
  for (size_t sent = 0; sent < data.size();) {
    const ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
}

}  // namespace

ServedModel& tiny_served_model() {
  static ServedModel model([] {
    ServedModelOptions o;
    o.dir = tiny_toolcaller_dir();
    o.threads = 2;
    return o;
  }());
  return model;
}

RawResponse raw_request(int port, const std::string& request) {
  const int fd = connect_loopback(port);
  send_all(fd, request);
  // Read one response: its head, then Content-Length bytes of body (or up to the close).
  RawResponse out;
  std::string got;
  size_t head_end = std::string::npos, body_length = std::string::npos;
  char buf[4096];
  while (head_end == std::string::npos || body_length == std::string::npos || got.size() < head_end + 4 + body_length) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
    if (head_end == std::string::npos && (head_end = got.find("\r\n\r\n")) != std::string::npos) {
      std::istringstream head(got.substr(0, head_end));
      std::string line;
      std::getline(head, line);  // the status line
      while (std::getline(head, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        const size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        out.headers.emplace(line.substr(0, colon), line.substr(std::min(line.size(), line.find_first_not_of(' ', colon + 1))));
      }
      if (out.headers.count("Content-Length")) body_length = std::stoul(out.headers.find("Content-Length")->second);
    }
  }
  close(fd);
  if (got.rfind("HTTP/1.", 0) != 0 || head_end == std::string::npos)
    throw std::runtime_error("not an HTTP response: " + got.substr(0, 200));
  out.status = std::stoi(got.substr(got.find(' ') + 1, 3));
  out.body = got.substr(head_end + 4, body_length);
  return out;
}

std::string read_then_hang_up(int port, const std::string& path, const std::string& body, size_t bytes) {
  const int fd = connect_loopback(port);
  const std::string head = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
                           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  const std::string message = head + body;
  send_all(fd, message);
  std::string got;
  char buf[4096];
  while (got.size() < bytes) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return got;
}

}  // namespace keel::test
