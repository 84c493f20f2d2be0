#pragma once
// A real `keel serve` for integration tests: started on 127.0.0.1 with a free port, stopped with
// SIGTERM when the object goes away. Tests talk to it over HTTP like any client.
#include <netinet/in.h>

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
  // `args` come after `keel serve`; --model defaults to the bundled tiny-toolcaller. `env`:
  // NAME=value entries set for the server alone, over the test's own environment. `binary`: the
  // keel to run (default: the one this test build built).
  explicit ServerProcess(std::vector<std::string> args = {}, std::vector<std::string> env = {},
                         std::filesystem::path binary = {});
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }
  int pid() const { return pid_; }
  httplib::Client client(std::chrono::seconds timeout = std::chrono::seconds(120)) const;
  std::string log() const;  // everything it wrote to stderr so far
  bool running() const;
  // Sends `signal` and waits up to `timeout` for the server to exit: its exit status (the signal
  // number + 128 if a signal ended it), or -1 if it is still running.
  int signal_and_wait(int signal, std::chrono::milliseconds timeout);

 private:
  TempDir dir_;
  int pid_ = -1;
  int port_ = 0;
};

std::filesystem::path tiny_toolcaller_dir();
// About `tokens` tokens of English prose under tiny-toolcaller's tokenizer (never fewer).
std::string prose(size_t tokens);
// A random-weight copy of tiny-toolcaller (same shapes and tokenizer), written into `dir` by
// `keel synth`: greedy (temperature 0), it never picks the end-of-sequence token, so its answers
// run to max_tokens; sampled, it reaches it now and then (a few hundred tokens in). Served under
// the name "random-talker".
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
// 127.0.0.1:port as a socket address.
sockaddr_in loopback_address(int port);
// A TCP connection to 127.0.0.1:port (throws when it cannot be made), and a send of all of `data`
// that the peer takes.
int connect_loopback(int port);
void send_all(int fd, const std::string& data);

// Sends a POST over a plain socket, reads at least `bytes` bytes of the answer, then closes the
// connection mid-response, as a client that goes away does. Returns what it read. `reset` closes
// with a reset (RST), as a client's close does when answer bytes it never read are waiting; a
// clean close (FIN) of a streamed answer is seen only when the server next writes to it.
std::string read_then_hang_up(int port, const std::string& path, const std::string& body, size_t bytes,
                              bool reset = false);

// Checks an Anthropic SSE stream event by event against the Messages streaming grammar and
// rebuilds the message it describes ({"content": [...], "stop_reason", "usage", ...}). Throws
// std::runtime_error naming the first event that breaks the grammar.
nlohmann::ordered_json replay_anthropic_stream(const std::vector<SseEvent>& events);

// The same for OpenAI chat.completion.chunk streams: rebuilds {"content", "reasoning_content",
// "tool_calls": [{"id","name","arguments"}], "finish_reason", "usage"}.
nlohmann::ordered_json replay_openai_stream(const std::vector<SseEvent>& events);

}  // namespace keel::test

namespace keel::test {

// Protocol checks for a served model whose answers are noise: random weights from `keel synth`
// behind a model's real chat template and control tokens (the gpt-oss and Gemma 4 synth tests).
// They check the form of every answer, never its content: well-formed bodies, legal stop and
// finish reasons, consistent usage, calls whose arguments fit the tool's schema. The requests
// offer one tool, get_weather {city, days?}, and ask a question it would answer.
class NoiseChecks {
 public:
  // `server` serves `model`; the requests ask for at most `max_tokens`.
  NoiseChecks(const ServerProcess& server, std::string model, int max_tokens);

  // A system prompt, the tool and one question, at temperature 0.
  nlohmann::ordered_json anthropic_request() const;
  nlohmann::ordered_json openai_request() const;

  // What /v1/messages/count_tokens says for `request` (its "stream" dropped).
  int64_t count_tokens(httplib::Client& client, const nlohmann::ordered_json& request) const;

  // An Anthropic message, whole or rebuilt from its stream; `prompt_tokens` is what count_tokens
  // said for its request.
  void check_anthropic_message(const nlohmann::ordered_json& m, int64_t prompt_tokens) const;
  void check_openai_completion(const nlohmann::ordered_json& body) const;
  // An OpenAI answer rebuilt from its stream (replay_openai_stream's shape), usage included.
  void check_openai_stream(const nlohmann::ordered_json& streamed) const;

  // Streams `request` (its "stream" set here) to `path` and rebuilds the answer with the strict
  // grammar checker of its protocol; null, with a failure recorded, when the answer is not a 200
  // event stream that follows the grammar.
  nlohmann::ordered_json stream(httplib::Client& client, const std::string& path, nlohmann::ordered_json request) const;

  // `request` to /v1/chat/completions whole and streamed (with usage): both are checked and must
  // describe the same message. Returns the whole answer.
  JsonResponse openai_whole_and_streamed(httplib::Client& client, const nlohmann::ordered_json& request) const;

  // An Anthropic history whose second message opens with a thinking block before a call: it
  // counts more tokens than without the thinking (the template renders it), and its streamed
  // answer passes the checks.
  void check_reasoning_history(httplib::Client& client, const nlohmann::ordered_json& history) const;

 private:
  void check_output_tokens(int64_t output, bool hit_max_tokens) const;
  void check_openai_usage(const nlohmann::ordered_json& usage, bool hit_length) const;

  const ServerProcess& server_;
  std::string model_;
  int max_tokens_;
};

// What an Anthropic response's content means, whichever way it came: blocks without ids and
// signatures.
nlohmann::ordered_json anthropic_gist(const nlohmann::ordered_json& content);

// The next request: `request` with the answer replayed, then the results of its calls, or a
// further question when it made none.
nlohmann::ordered_json anthropic_next_turn(nlohmann::ordered_json request, const nlohmann::ordered_json& answer);
nlohmann::ordered_json openai_next_turn(nlohmann::ordered_json request, const nlohmann::ordered_json& message);

}  // namespace keel::test
