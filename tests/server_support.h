#pragma once
// A real `keel serve` for integration tests: started on 127.0.0.1 with a free port, stopped with
// SIGTERM when the object goes away. Tests talk to it over HTTP like any client.
#include <chrono>
#include <string>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "keel/engine/served_model.h"
#include "test_support.h"

namespace keel::test {

class ServerProcess {
 public:
  // `args` come after `keel serve`; --model defaults to the bundled tiny-toolcaller.
  explicit ServerProcess(std::vector<std::string> args = {});
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }
  httplib::Client client(std::chrono::seconds timeout = std::chrono::seconds(120)) const;
  std::string log() const;  // everything it wrote to stderr so far
  bool running() const;

 private:
  TempDir dir_;
  int pid_ = -1;
  int port_ = 0;
};

std::filesystem::path tiny_toolcaller_dir();
// About `tokens` tokens of English prose under tiny-toolcaller's tokenizer (never fewer).
std::string prose(size_t tokens);
// A random-weight copy of tiny-toolcaller (same shapes and tokenizer), written into `dir` by
// `keel synth`: it practically never samples the end-of-sequence token, so its answers run to
// max_tokens. Served under the name "random-talker".
std::filesystem::path random_talker(const TempDir& dir);
// The bundled tiny-toolcaller loaded once per test process, for tests that prepare prompts or run
// turns without a server (engine thread rules apply: one test at a time uses it).
ServedModel& tiny_served_model();
// ../shared/fixtures/golden/tiny-toolcaller.session.json: Claude Code-like requests and answers.
const nlohmann::ordered_json& session_fixture();

struct SseEvent {
  std::string event;  // empty for OpenAI's data-only events
  std::string data;
};
std::vector<SseEvent> parse_sse(const std::string& body);

// POSTs JSON, returning the status and the parsed body (null when not JSON).
struct JsonResponse {
  int status = 0;
  nlohmann::ordered_json body;
  std::string text;
  httplib::Headers headers;
};
JsonResponse post_json(httplib::Client& client, const std::string& path, const nlohmann::ordered_json& body,
                       const httplib::Headers& headers = {});

}  // namespace keel::test

namespace keel::test {

// Sends `request` byte for byte over a plain socket (the caller writes every header, Host or no
// Host) and reads one response: its head and Content-Length bytes of body, or up to the close.
struct RawResponse {
  int status = 0;
  httplib::Headers headers;
  std::string body;
};
RawResponse raw_request(int port, const std::string& request);

// Sends a POST over a plain socket, reads at least `bytes` bytes of the answer, then closes the
// connection mid-response, as a client that goes away does. Returns what it read.
std::string read_then_hang_up(int port, const std::string& path, const std::string& body, size_t bytes);

// Checks an Anthropic SSE stream event by event against the Messages streaming grammar and
// rebuilds the message it describes ({"content": [...], "stop_reason", "usage", ...}). Throws
// std::runtime_error naming the first event that breaks the grammar.
nlohmann::ordered_json replay_anthropic_stream(const std::vector<SseEvent>& events);

// The same for OpenAI chat.completion.chunk streams: rebuilds {"content", "reasoning_content",
// "tool_calls": [{"id","name","arguments"}], "finish_reason", "usage"}.
nlohmann::ordered_json replay_openai_stream(const std::vector<SseEvent>& events);

}  // namespace keel::test
