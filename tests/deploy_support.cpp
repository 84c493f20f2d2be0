#include "deploy_support.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <thread>

#include <httplib.h>

#include "server_support.h"

namespace keel::test {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

namespace {

bool port_is_free(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const sockaddr_in addr = loopback_address(port);
  const bool free = bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return free;
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

int free_ports(int count) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> base(20000, 60000);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int first = base(rng);
    bool all = true;
    for (int i = 0; i < count && all; ++i) all = port_is_free(first + i);
    if (all) return first;
  }
  throw std::runtime_error("no free loopback ports");
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto at = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size()))) - 1;
  return values[std::min(at, values.size() - 1)];
}

Deployment::Deployment(const std::filesystem::path& model, int replicas, const std::string& balance,
                       std::vector<std::string> keel_flags) {
  const int first = free_ports(replicas + 1);
  port_ = first;
  first_port_ = first + 1;
  const std::filesystem::path keel = release_binary().empty() ? keel_binary() : release_binary();
  std::vector<std::string> argv = {"/bin/bash", (source_dir() / "deploy/haproxy/run-replicas").string(),
                                   "--replicas", std::to_string(replicas),
                                   "--port", std::to_string(port_),
                                   "--first-port", std::to_string(first_port_),
                                   "--run-dir", dir_.path().string()};
  if (!balance.empty()) argv.insert(argv.end(), {"--balance", balance});
  argv.insert(argv.end(), {"--", "--model", model.string(), "--alias", "*"});
  argv.insert(argv.end(), keel_flags.begin(), keel_flags.end());

  const auto out = dir_.path() / "run-replicas.log";
  pid_ = spawn_process(argv, environment_with({"KEEL=" + keel.string()}), out, out);

  // Ready once HAProxy answers and a replica behind it does.
  httplib::Client client("127.0.0.1", port_);
  client.set_connection_timeout(1);
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (Clock::now() < deadline) {
    if (auto res = client.Get("/health"); res && res->status == 200) return;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("run-replicas exited at start:\n" + read_text(out));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  throw std::runtime_error("the deployment did not become ready:\n" + read_text(out));
}

Deployment::~Deployment() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  int status = 0;
  for (int i = 0; i < 3000; ++i) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // A stuck run: stop everything it started (its process group).
  kill(-pid_, SIGKILL);
  waitpid(pid_, &status, 0);
}

pid_t Deployment::replica_pid(int i) const {
  return std::stoi(read_text(dir_.path() / ("keel" + std::to_string(i) + ".pid")));
}

std::string Deployment::log(const std::string& name) const {
  const auto path = dir_.path() / (name + ".log");
  return std::filesystem::exists(path) ? read_text(path) : std::string();
}

double StreamedTurn::cached_share() const {
  const int64_t prompt = input_tokens + cache_read_tokens + cache_creation_tokens;
  return prompt == 0 ? 0.0 : static_cast<double>(cache_read_tokens) / static_cast<double>(prompt);
}

StreamedTurn stream_turn(int port, const json& request, const std::string& session,
                         const std::function<void()>& on_started, std::chrono::seconds timeout) {
  json body = request;
  body["stream"] = true;
  StreamedTurn turn;
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5);
  client.set_read_timeout(timeout);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/messages";
  req.headers = {{"x-claude-code-session-id", session}, {"anthropic-version", "2023-06-01"}};
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  std::string text;
  const auto start = Clock::now();
  bool started = false;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    text.append(data, n);
    if (!started && text.find("event: message_start") != std::string::npos) {
      started = true;
      if (on_started) on_started();
    }
    if (turn.seconds_to_first_token < 0 && text.find("event: content_block_start") != std::string::npos)
      turn.seconds_to_first_token = seconds_since(start);
    return true;
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  const bool sent = client.send(req, res, error);
  turn.seconds = seconds_since(start);
  turn.status = res.status > 0 ? res.status : 0;
  turn.replica = res.get_header_value("X-Keel-Replica");
  if (!sent) turn.error = "HTTP error: " + httplib::to_string(error);
  if (turn.status != 200) {
    if (turn.error.empty()) turn.error = "status " + std::to_string(turn.status) + ": " + text.substr(0, 300);
    return turn;
  }
  const std::vector<SseEvent> events = parse_sse(text);
  const bool stopped = std::any_of(events.begin(), events.end(), [](const SseEvent& e) { return e.event == "message_stop"; });
  if (!sent || !stopped) {
    if (turn.error.empty()) turn.error = "the stream ended without message_stop";
    return turn;
  }
  try {
    turn.message = replay_anthropic_stream(events);
  } catch (const std::exception& e) {
    turn.error = e.what();
    return turn;
  }
  const json& usage = turn.message["usage"];
  turn.input_tokens = usage.value("input_tokens", int64_t{0});
  turn.cache_read_tokens = usage.value("cache_read_input_tokens", int64_t{0});
  turn.cache_creation_tokens = usage.value("cache_creation_input_tokens", int64_t{0});
  turn.complete = true;
  return turn;
}

json session_request(const std::string& session, int max_tokens) {
  static const std::string shared = "You are an interactive CLI tool that helps users with software engineering tasks. " + prose(2500);
  const std::string own = "\n<env>\nWorking directory: /home/dev/" + session + "\nIs directory a git repo: yes\n</env>\n" +
                          "Notes for " + session + ": " + prose(800);
  json tools = json::array();
  for (const char* name : {"Read", "Edit", "Bash"})
    tools.push_back({{"name", name},
                     {"description", std::string(name) + " a file or run a command in the working directory."},
                     {"input_schema",
                      {{"type", "object"},
                       {"properties", {{"path", {{"type", "string"}}}, {"command", {{"type", "string"}}}}}}}});
  return {{"model", "keel"},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"system", shared + own},
          {"tools", tools},
          {"messages", {{{"role", "user"}, {"content", "Find where " + session + " parses its config."}}}}};
}

json next_session_request(json request, const json& answer, int turn) {
  json& messages = request["messages"];
  messages.push_back({{"role", "assistant"}, {"content", answer["content"]}});
  // What a tool result adds to a coding session each turn: a screenful of file.
  const std::string output = "Turn " + std::to_string(turn) + " output:\n" + prose(120);
  json content = json::array();
  for (const json& block : answer["content"])
    if (block["type"] == "tool_use")
      content.push_back({{"type", "tool_result"}, {"tool_use_id", block["id"]}, {"content", output}});
  content.push_back({{"type", "text"}, {"text", content.empty() ? output + "\nWhat next?" : "What next?"}});
  messages.push_back({{"role", "user"}, {"content", content}});
  return request;
}

}  // namespace keel::test
