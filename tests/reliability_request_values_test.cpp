// Request values at and past their boundaries, through a real server: every sampling field of both
// APIs answers 400 in the protocol's error envelope or 200, never 500; overloaded answers carry
// Retry-After; a refused stream gets the error in the form its client reads (the HTTP error JSON
// before the stream starts, the protocol's error event after); and retried tool calls count
// against max_tokens.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "keel/api/server.h"
#include "keel/engine/chat_turn.h"
#include "keel/engine/session_cache.h"
#include "keel/kv/kv_footprint.h"
#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;

const std::string kAnthropic = "/v1/messages";
const std::string kOpenAI = "/v1/chat/completions";

struct Answer {
  int status = 0;
  std::string text, content_type, retry_after;
  json body;  // null when not JSON
};

Answer post(httplib::Client& client, const std::string& path, const std::string& body) {
  auto res = client.Post(path, body, "application/json");
  if (!res) throw std::runtime_error("POST " + path + " failed: " + httplib::to_string(res.error()));
  Answer a{res->status, res->body, res->get_header_value("Content-Type"), res->get_header_value("Retry-After"), nullptr};
  a.body = json::parse(res->body, nullptr, false);
  if (a.body.is_discarded()) a.body = nullptr;
  return a;
}

json hello(int max_tokens = 4) {
  return {{"model", "tiny-toolcaller"}, {"max_tokens", max_tokens},
          {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
}

// The error envelope each SDK parses (docs/serve.md, Errors), for an answer refused before any
// stream started, whatever the request's `stream`.
void expect_error_envelope(const std::string& path, const Answer& a, const std::string& anthropic_type,
                           const std::string& what) {
  EXPECT_NE(a.content_type.find("application/json"), std::string::npos) << what << ": " << a.content_type;
  ASSERT_TRUE(a.body.is_object()) << what << ": " << a.text;
  const json& e = a.body["error"];
  ASSERT_TRUE(e.is_object()) << what << ": " << a.text;
  EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << what << ": " << a.text;
  if (path == kAnthropic) {
    EXPECT_EQ(a.body["type"], "error") << what << ": " << a.text;
    EXPECT_EQ(e["type"], anthropic_type) << what << ": " << a.text;
  } else {
    EXPECT_FALSE(a.body.contains("type")) << what << ": " << a.text;
    EXPECT_EQ(e["type"], a.status >= 500 ? "server_error" : "invalid_request_error") << what << ": " << a.text;
    EXPECT_TRUE(e.contains("param") && e.contains("code")) << what << ": " << a.text;
  }
}

// One field set to one value (or, with `raw`, spliced into the body as text that is not JSON),
// and the status each API must answer.
struct Case {
  std::string field;
  json value;
  int anthropic, openai;
  std::string raw = "";
};

std::vector<Case> sampling_cases() {
  const json nan_text = "NaN", inf_text = "Infinity";
  return {
      // temperature: Anthropic [0, 1], OpenAI [0, 2]
      {"temperature", 0, 200, 200},
      {"temperature", 1, 200, 200},
      {"temperature", 1.5, 400, 200},
      {"temperature", 2, 400, 200},
      {"temperature", 2.0000001, 400, 400},
      {"temperature", -0.5, 400, 400},
      {"temperature", 1e308, 400, 400},
      {"temperature", nan_text, 400, 400},
      {"temperature", "0.5", 400, 400},
      {"temperature", true, 400, 400},
      {"temperature", json::array({0.5}), 400, 400},
      {"temperature", json::object(), 400, 400},
      {"temperature", nullptr, 200, 200},
      {"temperature", nullptr, 400, 400, "NaN"},
      {"temperature", nullptr, 400, 400, "1e999"},
      {"temperature", nullptr, 400, 400, "-Infinity"},
      // top_p: [0, 1] in both; 0 is greedy
      {"top_p", 0, 200, 200},
      {"top_p", 0.0000001, 200, 200},
      {"top_p", 0.5, 200, 200},
      {"top_p", 1, 200, 200},
      {"top_p", -0.1, 400, 400},
      {"top_p", 1.0000001, 400, 400},
      {"top_p", 100, 400, 400},
      {"top_p", inf_text, 400, 400},
      {"top_p", false, 400, 400},
      // top_k: Anthropic >= 0; OpenAI (an extension) -1 or 0 off
      {"top_k", 0, 200, 200},
      {"top_k", 1, 200, 200},
      {"top_k", 2147483647, 200, 200},
      {"top_k", -1, 400, 200},
      {"top_k", -2, 400, 400},
      {"top_k", 2147483648LL, 400, 400},
      {"top_k", 1e30, 400, 400},
      {"top_k", 1.5, 400, 400},
      {"top_k", "5", 400, 400},
      // max_tokens: at least 1, clamped to the cap and the room left in the context
      {"max_tokens", 1, 200, 200},
      {"max_tokens", 4.0, 200, 200},
      {"max_tokens", 9223372036854775807LL, 200, 200},
      {"max_tokens", 0, 400, 400},
      {"max_tokens", -1, 400, 400},
      {"max_tokens", 4.5, 400, 400},
      {"max_tokens", 1e30, 400, 400},
      {"max_tokens", 18446744073709551615ULL, 400, 400},
      {"max_tokens", "4", 400, 400},
      {"max_tokens", nullptr, 400, 200},  // required by Anthropic; OpenAI's default applies
      {"max_completion_tokens", 0, 200, 400},
      {"max_completion_tokens", 3, 200, 200},
      // penalties: OpenAI's [-2, 2], applied; not Anthropic fields
      {"presence_penalty", 0, 200, 200},
      {"presence_penalty", 0.5, 200, 200},
      {"presence_penalty", -2.5, 200, 400},
      {"presence_penalty", "0", 200, 400},
      {"frequency_penalty", 0, 200, 200},
      {"frequency_penalty", 2, 200, 200},
      {"frequency_penalty", -2.01, 200, 400},
      {"frequency_penalty", 1e300, 200, 400},
      {"frequency_penalty", json::array(), 200, 400},
      // logit_bias: token ids the model has, biases in [-100, 100] (OpenAI)
      {"logit_bias", json::object(), 200, 200},
      {"logit_bias", json{{"17", -100}, {"42", 5.5}}, 200, 200},
      {"logit_bias", json{{"17", 101}}, 200, 400},
      {"logit_bias", json{{"x", 1}}, 200, 400},
      {"logit_bias", json{{"-1", 1}}, 200, 400},
      {"logit_bias", json{{"99999999", 1}}, 200, 400},
      {"logit_bias", json::array(), 200, 400},
      // seed: any 64-bit integer (OpenAI); not an Anthropic field
      {"seed", 0, 200, 200},
      {"seed", -1, 200, 200},
      {"seed", 9223372036854775807LL, 200, 200},
      {"seed", 1e30, 200, 400},
      {"seed", 1.5, 200, 400},
      {"seed", "7", 200, 400},
      // stop (OpenAI) and stop_sequences (Anthropic)
      {"stop", "", 200, 200},
      {"stop", json::array({"a", "b", "c", "d"}), 200, 200},
      {"stop", json::array({""}), 200, 400},
      {"stop", 5, 200, 400},
      {"stop", json::array({5}), 200, 400},
      {"stop_sequences", json::array(), 200, 200},
      {"stop_sequences", json::array({"a"}), 200, 200},
      {"stop_sequences", json::array({""}), 400, 200},
      {"stop_sequences", "a", 400, 200},
      {"stop_sequences", json::array({nullptr}), 400, 200},
      // n: OpenAI 1 to 16 (above 1 without streaming: api_openai_request_test); not an Anthropic field
      {"n", 1, 200, 200},
      {"n", 0, 200, 400},
      {"n", 17, 200, 400},
      {"n", -1, 200, 400},
      {"n", "1", 200, 400},
      // stream itself
      {"stream", "yes", 400, 400},
      {"stream", 1, 400, 400},
  };
}

std::string body_of(const Case& c, bool stream) {
  json body = hello();
  body["stream"] = stream;
  if (c.field == "max_tokens") body.erase("max_tokens");
  if (c.field == "stream") body.erase("stream");
  if (!c.raw.empty()) {
    body[c.field] = "@RAW@";
    std::string text = body.dump();
    text.replace(text.find("\"@RAW@\""), 7, c.raw);
    return text;
  }
  if (!c.value.is_null()) body[c.field] = c.value;
  else if (c.field != "max_tokens") body[c.field] = nullptr;  // an explicit null: absent
  return body.dump();
}

TEST(ReliabilityRequestValues, SamplingBoundariesAreA400OrA200NeverA500) {
  // A small context bounds the answers that run to max_tokens (the clamped huge values).
  ServerProcess server({"--context", "256"});
  auto client = server.client();
  int checked = 0;
  for (const Case& c : sampling_cases()) {
    for (const std::string& path : {kAnthropic, kOpenAI}) {
      for (bool stream : {false, true}) {
        const std::string body = body_of(c, stream);
        const std::string what = path + " " + body;
        const Answer a = post(client, path, body);
        ++checked;
        EXPECT_EQ(a.status, path == kAnthropic ? c.anthropic : c.openai) << what << "\n" << a.text;
        if (a.status == 400) {
          expect_error_envelope(path, a, "invalid_request_error", what);
          // The message names the field, unless the body was not JSON at all.
          if (c.raw.empty() && a.body.is_object()) {
            EXPECT_NE(a.body["error"]["message"].get<std::string>().find(c.field), std::string::npos) << what << "\n" << a.text;
          }
        } else if (a.status == 200 && stream) {
          EXPECT_NE(a.content_type.find("text/event-stream"), std::string::npos) << what;
          if (path == kAnthropic) EXPECT_NO_THROW(replay_anthropic_stream(parse_sse(a.text))) << what << "\n" << a.text;
          else EXPECT_NO_THROW(replay_openai_stream(parse_sse(a.text))) << what << "\n" << a.text;
        } else if (a.status == 200) {
          ASSERT_TRUE(a.body.is_object()) << what << "\n" << a.text;
          EXPECT_EQ(path == kAnthropic ? a.body["type"] : a.body["object"],
                    path == kAnthropic ? "message" : "chat.completion")
              << what << "\n" << a.text;
        }
      }
    }
  }
  EXPECT_GT(checked, 300);
  EXPECT_TRUE(server.running());
  EXPECT_EQ(server.log().find("-> 500"), std::string::npos) << server.log();
}

// A request sent over a plain socket and never read: it keeps its place in the engine (running or
// waiting) until the socket closes, which cancels it.
class HeldRequest {
 public:
  HeldRequest(int port, const std::string& path, const std::string& body) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      throw std::runtime_error("cannot connect to the server");
    const std::string request = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
                                "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    if (send(fd_, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size()))
      throw std::runtime_error("cannot send the request");
  }
  ~HeldRequest() { close(fd_); }
  HeldRequest(const HeldRequest&) = delete;
  HeldRequest& operator=(const HeldRequest&) = delete;

 private:
  int fd_ = -1;
};

json queue_of(httplib::Client& client) {
  auto res = client.Get("/health");
  return res ? json::parse(res->body, nullptr, false).value("queue", json::object()) : json::object();
}

TEST(ReliabilityRequestValues, AFullQueueRefusesStreamsBeforeTheyStartWithRetryAfter) {
  TempDir dir;
  ServerProcess server({"--model", random_talker(dir).string(), "--queue-depth", "1", "--parallel", "1"});
  auto client = server.client();
  // Greedy, random weights write to max_tokens (over a minute here) without an end of sequence.
  json essay = hello(30000);
  essay["model"] = "random-talker";
  essay["temperature"] = 0;
  essay["messages"][0]["content"] = "Write a very long essay about rivers.";
  const auto queue_reaches = [&](int running, int waiting) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    json queue;
    while (std::chrono::steady_clock::now() < deadline) {
      queue = queue_of(client);
      if (queue.value("running", 0) == running && queue.value("waiting", 0) == waiting) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "the queue never reached running " << running << ", waiting " << waiting << ": " << queue.dump()
                  << "\n" << server.log();
    return false;
  };
  {
    // One turn runs and one waits: the queue (depth 1) is full. The second is sent once the first
    // runs, so that it is not refused itself.
    HeldRequest running(server.port(), kAnthropic, essay.dump());
    ASSERT_TRUE(queue_reaches(1, 0));
    HeldRequest waiting(server.port(), kOpenAI, essay.dump());
    ASSERT_TRUE(queue_reaches(1, 1));

    for (const std::string& path : {kAnthropic, kOpenAI}) {
      for (bool stream : {true, false}) {
        json request = hello();
        request["model"] = "random-talker";
        request["stream"] = stream;
        const Answer a = post(client, path, request.dump());
        const std::string what = path + (stream ? " stream" : "");
        EXPECT_EQ(a.status, path == kAnthropic ? 529 : 503) << what << "\n" << a.text;
        expect_error_envelope(path, a, "overloaded_error", what);
        EXPECT_GT(std::atoi(a.retry_after.c_str()), 0) << what << ": Retry-After '" << a.retry_after << "'";
      }
    }
    // Other errors carry no Retry-After: it says "the same request may succeed later".
    json bad = hello();
    bad["temperature"] = -1;
    const Answer refused = post(client, kAnthropic, bad.dump());
    EXPECT_EQ(refused.status, 400) << refused.text;
    EXPECT_EQ(refused.retry_after, "");
  }
  // The held requests are gone (closed, so cancelled): the server answers again.
  json next = hello(2);
  next["model"] = "random-talker";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  Answer after;
  while (std::chrono::steady_clock::now() < deadline) {
    after = post(client, kAnthropic, next.dump());
    if (after.status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(after.status, 200) << after.text;
}

// A failure once a stream was answered 200: an in-process server whose KV pool holds two blocks
// (`keel serve` refuses a pool smaller than a context; a pool full of live sequences is the same
// failure), given a prompt that needs more.
TEST(ReliabilityRequestValues, AStreamRefusedAfterItStartedEndsWithTheProtocolsErrorEvent) {
  ServedModel& model = tiny_served_model();
  const ModelSpec& spec = model.weights().spec;
  const int64_t context = 4096;
  const auto two_blocks = static_cast<int64_t>(kv::kv_bytes_per_token(spec, kv::KvPolicy(), context) * 40);
  SessionCache session(spec, two_blocks, kv::KvPolicy(), true, context);
  api::ServerOptions options;
  options.port = 0;
  api::Server server(model, session, options);
  const int port = server.bind();
  std::thread serving([&] { server.run(); });

  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(std::chrono::seconds(120));
  json request = hello();
  request["messages"][0]["content"] = prose(300);
  for (const std::string& path : {kAnthropic, kOpenAI}) {
    // Not streamed: the status and envelope of an overloaded server, with Retry-After.
    request["stream"] = false;
    const Answer whole = post(client, path, request.dump());
    EXPECT_EQ(whole.status, path == kAnthropic ? 529 : 503) << whole.text;
    expect_error_envelope(path, whole, "overloaded_error", path);
    EXPECT_GT(std::atoi(whole.retry_after.c_str()), 0) << path;

    // Streamed: the 200 and the stream's start went out first, so the error is the stream's last event.
    request["stream"] = true;
    const Answer streamed = post(client, path, request.dump());
    EXPECT_EQ(streamed.status, 200) << streamed.text;
    EXPECT_NE(streamed.content_type.find("text/event-stream"), std::string::npos) << streamed.content_type;
    const std::vector<SseEvent> events = parse_sse(streamed.text);
    ASSERT_GE(events.size(), 2u) << streamed.text;
    if (path == kAnthropic) {
      EXPECT_EQ(events.front().event, "message_start") << streamed.text;
      EXPECT_EQ(events.back().event, "error") << streamed.text;
      const json e = json::parse(events.back().data);
      EXPECT_EQ(e["type"], "error") << streamed.text;
      EXPECT_EQ(e["error"]["type"], "overloaded_error") << streamed.text;
      EXPECT_TRUE(e["error"]["message"].is_string()) << streamed.text;
      for (const SseEvent& ev : events) EXPECT_NE(ev.event, "message_stop") << streamed.text;
    } else {
      EXPECT_EQ(events.back().data, "[DONE]") << streamed.text;
      const json e = json::parse(events[events.size() - 2].data);
      EXPECT_EQ(e["error"]["type"], "server_error") << streamed.text;
      EXPECT_TRUE(e["error"]["message"].is_string()) << streamed.text;
      EXPECT_TRUE(e["error"].contains("code")) << streamed.text;
      EXPECT_EQ(json::parse(events.front().data)["object"], "chat.completion.chunk") << streamed.text;
    }
  }
  server.stop();
  serving.join();
}

// The bundled tool caller made to write a tool call that its end of sequence cuts off, attempt
// after attempt: an invalid call, retried from where it began.
std::function<void(std::span<const int32_t>, std::span<float>)> always_cut_call(ServedModel& model) {
  const std::string call = "<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"ls";
  return [&model, call](std::span<const int32_t> generated, std::span<float> logits) {
    const text::Tokenizer& tok = model.tokenizer();
    const std::string so_far = tok.decode(generated);
    const std::string rest = call.starts_with(so_far) ? call.substr(so_far.size()) : std::string();
    const int32_t next = rest.empty() ? model.weights().eos_token_ids.front() : tok.encode(rest).front();
    for (float& l : logits) l = 0.0f;
    logits[static_cast<size_t>(next)] = 100.0f;
  };
}

struct RetryTurn {
  TurnResult result;
  std::string text;
};

RetryTurn run_retries(int64_t max_tokens, int tool_retries) {
  ServedModel& model = tiny_served_model();
  const json tools = json::parse(R"([{"type":"function","function":{"name":"Bash","description":"Run a command",
    "parameters":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}}])");
  const PreparedPrompt prompt = model.prepare(json::parse(R"([{"role":"user","content":"List the files."}])"), tools, false);
  const ModelSpec& spec = model.weights().spec;
  const int64_t context = 4096;
  const auto budget = static_cast<int64_t>(kv::kv_bytes_per_token(spec, kv::KvPolicy(), context) * context) * 2;
  SessionCache session(spec, budget, kv::KvPolicy(), true, context);
  TurnOptions o;
  o.max_tokens = max_tokens;
  o.tools = tools;
  o.tool_retries = tool_retries;
  o.logits_processor = always_cut_call(model);
  RetryTurn t;
  t.result = run_turn(model, session, prompt, o, [&](TurnEvent&& e) { t.text += e.text; });
  return t;
}

// --tool-retries 1000000 once sampled 2,725 tokens for max_tokens 64: every retried token now
// counts against max_tokens, whatever --tool-retries allows.
TEST(ReliabilityToolRetries, RetriedTokensCountAgainstMaxTokens) {
  // One attempt: the cut call and the end of sequence that cuts it.
  const RetryTurn once = run_retries(1000, 0);
  const int64_t attempt = once.result.stats.output_tokens;
  ASSERT_GT(attempt, 4) << once.text;
  ASSERT_EQ(once.result.stats.invalid_calls, 1) << once.text;

  // The limit falls inside the fourth attempt: three retries ran, the fourth is cut by max_tokens.
  const RetryTurn cut = run_retries(3 * attempt + 4, 1000);
  EXPECT_EQ(cut.result.stats.output_tokens, 3 * attempt + 4) << cut.text;
  EXPECT_EQ(cut.result.stats.retries, 3) << cut.text;
  EXPECT_EQ(cut.result.stats.invalid_calls, 1) << cut.text;
  EXPECT_EQ(cut.result.finish, TurnFinish::MaxTokens) << cut.text;
  EXPECT_NE(cut.text.find("(max_tokens reached)"), std::string::npos) << cut.text;

  // The limit falls on the third attempt's last token: no token is left to retry with, so that
  // call is reported as it ended, not dropped.
  const RetryTurn exact = run_retries(3 * attempt, 1000);
  EXPECT_EQ(exact.result.stats.output_tokens, 3 * attempt) << exact.text;
  EXPECT_EQ(exact.result.stats.retries, 2) << exact.text;
  EXPECT_EQ(exact.result.stats.invalid_calls, 1) << exact.text;
  EXPECT_NE(exact.text.find("(the model ended its output there)) after 2 retries"), std::string::npos) << exact.text;
}

}  // namespace
}  // namespace keel::test
