#include "server_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string_view>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

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

ServerProcess::ServerProcess(std::vector<std::string> args, std::vector<std::string> env, std::filesystem::path binary) {
  bool has_model = false, has_port = false;
  for (const auto& a : args) {
    has_model |= a == "--model";
    has_port |= a == "--port";
  }
  std::vector<std::string> argv = {(binary.empty() ? keel_binary() : binary).string(), "serve"};
  if (!has_model) argv.insert(argv.end(), {"--model", tiny_toolcaller_dir().string()});
  if (!has_port) argv.insert(argv.end(), {"--port", "0"});
  argv.insert(argv.end(), {"--threads", "2"});
  argv.insert(argv.end(), args.begin(), args.end());

  pid_ = spawn_process(argv, environment_with(env), "/dev/null", dir_.path() / "serve.log");

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

int ServerProcess::signal_and_wait(int signal, std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  kill(pid_, signal);
  const auto until = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (std::chrono::steady_clock::now() < until) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
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

// A TCP connection to 127.0.0.1:port (throws when it cannot be made).
sockaddr_in loopback_address(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

int connect_loopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket failed");
  const sockaddr_in addr = loopback_address(port);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
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

ServedModel& tiny_served_model() {
  static ServedModel model(arch::resolve_model(tiny_toolcaller_dir()), ServedModelOptions{.threads = 2});
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

std::string read_then_hang_up(int port, const std::string& path, const std::string& body, size_t bytes, bool reset) {
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
  if (reset) {
    const linger abort_on_close{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close);
  }
  close(fd);
  return got;
}

namespace {

using json = nlohmann::ordered_json;

const json& weather_schema() {
  static const json schema = json::parse(R"({"type": "object",
      "properties": {"city": {"type": "string", "description": "City name"},
                     "days": {"type": "integer", "description": "How many days ahead"}},
      "required": ["city"]})");
  return schema;
}

// Empty when `args` fits weather_schema(), else why not.
std::string schema_error(const json& args) {
  if (!args.is_object()) return "arguments are not an object: " + args.dump();
  const json& schema = weather_schema();
  for (const auto& name : schema["required"])
    if (!args.contains(name.get<std::string>())) return "missing required " + name.get<std::string>() + ": " + args.dump();
  for (const auto& [name, value] : args.items()) {
    if (!schema["properties"].contains(name)) continue;  // additionalProperties is not false
    const std::string type = schema["properties"][name]["type"];
    if ((type == "string" && !value.is_string()) || (type == "integer" && !value.is_number_integer()))
      return "property " + name + " is not " + type + ": " + args.dump();
  }
  return "";
}

void check_finish_reason(const json& finish, size_t calls) {
  ASSERT_TRUE(finish.is_string()) << finish.dump();
  const std::string f = finish;
  EXPECT_TRUE(f == "stop" || f == "length" || f == "tool_calls") << f;
  if (f == "tool_calls") {
    EXPECT_GT(calls, 0u);
  }
}

void check_openai_call(const std::string& id, const std::string& name, const json& arguments) {
  EXPECT_FALSE(id.empty());
  EXPECT_EQ(name, "get_weather");
  ASSERT_TRUE(arguments.is_string()) << arguments.dump();
  const json args = json::parse(arguments.get<std::string>(), nullptr, false);
  EXPECT_FALSE(args.is_discarded()) << arguments;
  EXPECT_EQ(schema_error(args), "");
}

}  // namespace

NoiseChecks::NoiseChecks(const ServerProcess& server, std::string model, int max_tokens)
    : server_(server), model_(std::move(model)), max_tokens_(max_tokens) {}

json NoiseChecks::anthropic_request() const {
  return {{"model", model_},
          {"max_tokens", max_tokens_},
          {"temperature", 0},
          {"system", "You are a concise assistant."},
          {"tools", json::array({{{"name", "get_weather"},
                                  {"description", "Get the weather forecast for a city."},
                                  {"input_schema", weather_schema()}}})},
          {"messages", json::array({{{"role", "user"}, {"content", "What is the weather in Paris tomorrow?"}}})}};
}

json NoiseChecks::openai_request() const {
  return {{"model", model_},
          {"max_tokens", max_tokens_},
          {"temperature", 0},
          {"tools", json::array({{{"type", "function"},
                                  {"function", {{"name", "get_weather"},
                                                {"description", "Get the weather forecast for a city."},
                                                {"parameters", weather_schema()}}}}})},
          {"messages", json::array({{{"role", "system"}, {"content", "You are a concise assistant."}},
                                    {{"role", "user"}, {"content", "What is the weather in Paris tomorrow?"}}})}};
}

int64_t NoiseChecks::count_tokens(httplib::Client& client, const json& request) const {
  json counted = request;
  counted.erase("stream");  // thinking stays: it changes the prompt (gpt-oss's Reasoning: line, Gemma's <|think|>)
  const JsonResponse r = post_json(client, "/v1/messages/count_tokens", counted);
  EXPECT_EQ(r.status, 200) << r.text;
  return r.body.value("input_tokens", int64_t{-1});
}

// Tokens generated: at least one (the model's end of turn counts), at most max_tokens plus the
// tokens of one regenerated invalid call (retries count), and all of max_tokens when it stopped there.
void NoiseChecks::check_output_tokens(int64_t output, bool hit_max_tokens) const {
  EXPECT_GE(output, 1);
  EXPECT_LE(output, 2 * max_tokens_);
  if (hit_max_tokens) {
    EXPECT_GE(output, max_tokens_);
  }
}

void NoiseChecks::check_anthropic_message(const json& m, int64_t prompt_tokens) const {
  SCOPED_TRACE(m.dump());
  EXPECT_EQ(m.value("type", ""), "message");
  EXPECT_EQ(m.value("role", ""), "assistant");
  EXPECT_EQ(m.value("model", ""), model_);
  ASSERT_TRUE(m.contains("id") && m["id"].is_string());
  EXPECT_EQ(m["id"].get<std::string>().rfind("msg_", 0), 0u);
  ASSERT_TRUE(m.contains("content") && m["content"].is_array());
  bool has_call = false;
  for (const json& block : m["content"]) {
    const std::string type = block.value("type", "");
    if (type == "text") {
      EXPECT_TRUE(block.contains("text") && block["text"].is_string());
    } else if (type == "thinking") {
      EXPECT_TRUE(block.contains("thinking") && block["thinking"].is_string());
      EXPECT_TRUE(block.contains("signature") && block["signature"].is_string());
    } else if (type == "tool_use") {
      has_call = true;
      ASSERT_TRUE(block.contains("id") && block["id"].is_string());
      EXPECT_EQ(block["id"].get<std::string>().rfind("toolu_", 0), 0u);
      EXPECT_EQ(block.value("name", ""), "get_weather");
      EXPECT_EQ(schema_error(block.value("input", json())), "");
    } else {
      ADD_FAILURE() << "unexpected content block type " << block.dump();
    }
  }
  ASSERT_TRUE(m.contains("stop_reason") && m["stop_reason"].is_string());
  const std::string stop = m["stop_reason"];
  EXPECT_TRUE(stop == "end_turn" || stop == "max_tokens" || stop == "tool_use") << stop;
  if (stop == "tool_use") {
    EXPECT_TRUE(has_call);
  }
  EXPECT_TRUE(m.value("stop_sequence", json()).is_null());
  const json& usage = m.at("usage");
  for (const char* f : {"input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"}) {
    ASSERT_TRUE(usage.contains(f) && usage[f].is_number_integer()) << f;
    EXPECT_GE(usage[f].get<int64_t>(), 0) << f;
  }
  EXPECT_EQ(usage["input_tokens"].get<int64_t>() + usage["cache_read_input_tokens"].get<int64_t>(), prompt_tokens);
  check_output_tokens(usage["output_tokens"], stop == "max_tokens");
}

void NoiseChecks::check_openai_usage(const json& usage, bool hit_length) const {
  SCOPED_TRACE(usage.dump());
  for (const char* f : {"prompt_tokens", "completion_tokens", "total_tokens"})
    ASSERT_TRUE(usage.contains(f) && usage[f].is_number_integer()) << f;
  const int64_t prompt = usage["prompt_tokens"], completion = usage["completion_tokens"];
  EXPECT_GT(prompt, 0);
  EXPECT_EQ(usage["total_tokens"].get<int64_t>(), prompt + completion);
  const int64_t cached = usage.at("prompt_tokens_details").at("cached_tokens");
  EXPECT_GE(cached, 0);
  EXPECT_LE(cached, prompt);
  check_output_tokens(completion, hit_length);
}

void NoiseChecks::check_openai_completion(const json& body) const {
  SCOPED_TRACE(body.dump());
  EXPECT_EQ(body.value("object", ""), "chat.completion");
  ASSERT_TRUE(body.contains("id") && body["id"].is_string());
  EXPECT_EQ(body["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_TRUE(body.contains("created") && body["created"].is_number_integer());
  EXPECT_EQ(body.value("model", ""), model_);
  ASSERT_TRUE(body.contains("choices") && body["choices"].is_array());
  ASSERT_EQ(body["choices"].size(), 1u);
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice.value("index", -1), 0);
  const json& message = choice.at("message");
  EXPECT_EQ(message.value("role", ""), "assistant");
  ASSERT_TRUE(message.contains("content"));
  EXPECT_TRUE(message["content"].is_string() || message["content"].is_null());
  if (message.contains("reasoning_content")) {
    EXPECT_TRUE(message["reasoning_content"].is_string());
  }
  size_t calls = 0;
  if (message.contains("tool_calls")) {
    ASSERT_TRUE(message["tool_calls"].is_array());
    for (const json& call : message["tool_calls"]) {
      ++calls;
      EXPECT_EQ(call.value("type", ""), "function");
      check_openai_call(call.value("id", ""), call.at("function").value("name", ""), call.at("function").value("arguments", json()));
    }
  }
  check_finish_reason(choice.at("finish_reason"), calls);
  check_openai_usage(body.at("usage"), choice["finish_reason"] == "length");
}

void NoiseChecks::check_openai_stream(const json& streamed) const {
  SCOPED_TRACE(streamed.dump());
  EXPECT_TRUE(streamed["content"].is_string());
  EXPECT_TRUE(streamed["reasoning_content"].is_string());
  for (const json& call : streamed["tool_calls"]) check_openai_call(call["id"], call["name"], call["arguments"]);
  check_finish_reason(streamed["finish_reason"], streamed["tool_calls"].size());
  ASSERT_TRUE(streamed["usage"].is_object()) << "stream_options.include_usage was set";
  check_openai_usage(streamed["usage"], streamed["finish_reason"] == "length");
}

json NoiseChecks::stream(httplib::Client& client, const std::string& path, json request) const {
  request["stream"] = true;
  auto res = client.Post(path, request.dump(), "application/json");
  if (!res) {
    ADD_FAILURE() << path << ": no response";
    return nullptr;
  }
  if (res->status != 200) {
    ADD_FAILURE() << path << ": status " << res->status << "\n" << res->body << "\n" << server_.log();
    return nullptr;
  }
  EXPECT_EQ(res->get_header_value("Content-Type").rfind("text/event-stream", 0), 0u);
  try {
    return path == "/v1/messages" ? replay_anthropic_stream(parse_sse(res->body)) : replay_openai_stream(parse_sse(res->body));
  } catch (const std::exception& e) {
    ADD_FAILURE() << path << ": " << e.what() << "\n" << res->body;
    return nullptr;
  }
}

JsonResponse NoiseChecks::openai_whole_and_streamed(httplib::Client& client, const json& request) const {
  JsonResponse whole = post_json(client, "/v1/chat/completions", request);
  if (whole.status != 200) return whole;
  check_openai_completion(whole.body);
  json streamed_request = request;
  streamed_request["stream_options"] = {{"include_usage", true}};
  const json streamed = stream(client, "/v1/chat/completions", streamed_request);
  if (streamed.is_null()) return whole;  // stream() recorded the failure
  check_openai_stream(streamed);
  const json& message = whole.body["choices"][0]["message"];
  EXPECT_EQ(streamed["content"], message["content"].is_null() ? json("") : message["content"]);
  EXPECT_EQ(streamed["reasoning_content"], message.value("reasoning_content", json("")));
  EXPECT_EQ(streamed["tool_calls"].size(), message.value("tool_calls", json::array()).size());
  EXPECT_EQ(streamed["finish_reason"], whole.body["choices"][0]["finish_reason"]);
  EXPECT_EQ(streamed["usage"]["prompt_tokens"], whole.body["usage"]["prompt_tokens"]);
  EXPECT_EQ(streamed["usage"]["completion_tokens"], whole.body["usage"]["completion_tokens"]);
  return whole;
}

void NoiseChecks::check_reasoning_history(httplib::Client& client, const json& history) const {
  json without_reasoning = history;
  without_reasoning["messages"][1]["content"].erase(0);
  const int64_t history_tokens = count_tokens(client, history);
  EXPECT_GT(history_tokens, count_tokens(client, without_reasoning));
  const json streamed = stream(client, "/v1/messages", history);
  if (!streamed.is_null()) check_anthropic_message(streamed, history_tokens);
}

json anthropic_gist(const json& content) {
  json out = json::array();
  for (json block : content) {
    block.erase("id");
    block.erase("signature");
    out.push_back(block);
  }
  return out;
}

json anthropic_next_turn(json request, const json& answer) {
  json& messages = request["messages"];
  if (!answer["content"].empty()) messages.push_back({{"role", "assistant"}, {"content", answer["content"]}});
  json results = json::array();
  for (const json& block : answer["content"])
    if (block["type"] == "tool_use")
      results.push_back({{"type", "tool_result"}, {"tool_use_id", block["id"]}, {"content", "18 C, light rain"}});
  if (results.empty()) results.push_back({{"type", "text"}, {"text", "And in Rome?"}});
  messages.push_back({{"role", "user"}, {"content", results}});
  return request;
}

json openai_next_turn(json request, const json& message) {
  json& messages = request["messages"];
  json replay = {{"role", "assistant"}, {"content", message["content"]}};
  if (message.contains("reasoning_content")) replay["reasoning_content"] = message["reasoning_content"];
  if (message.contains("tool_calls")) replay["tool_calls"] = message["tool_calls"];
  messages.push_back(replay);
  if (message.contains("tool_calls"))
    for (const json& call : message["tool_calls"])
      messages.push_back({{"role", "tool"}, {"tool_call_id", call["id"]}, {"content", "18 C, light rain"}});
  else
    messages.push_back({{"role", "user"}, {"content", "And in Rome?"}});
  return request;
}

}  // namespace keel::test
