// What keel serve does with the size of a request against its context: a prompt that leaves no
// room is a client error before any byte of a stream, max_tokens is clamped to the room left, and
// a client that leaves during a long prefill frees the engine within a chunk or so.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;

json anthropic(const std::string& model, const std::string& text, int max_tokens, bool stream) {
  return {{"model", model}, {"max_tokens", max_tokens}, {"stream", stream},
          {"messages", json::array({{{"role", "user"}, {"content", text}}})}};
}

json openai(const std::string& model, const std::string& text, int max_tokens, bool stream) {
  return {{"model", model}, {"max_tokens", max_tokens}, {"stream", stream},
          {"messages", json::array({{{"role", "user"}, {"content", text}}})}};
}

TEST(ServeContext, PromptLongerThanTheContextIsRefusedBeforeAnyStreamByte) {
  ServerProcess server({"--context", "64"});
  auto client = server.client();
  for (bool stream : {false, true}) {
    const auto a = post_json(client, "/v1/messages", anthropic("tiny-toolcaller", prose(200), 100, stream));
    EXPECT_EQ(a.status, 400) << a.text;
    ASSERT_TRUE(a.body.is_object()) << a.text;  // a JSON envelope, not an event stream
    EXPECT_EQ(a.body["error"]["type"], "invalid_request_error");
    // "prompt is too long: N tokens > 63 maximum", the wording Claude Code compacts on.
    const std::string message = a.body["error"]["message"].get<std::string>();
    const std::string head = "prompt is too long: ", tail = " tokens > 63 maximum";
    ASSERT_TRUE(message.starts_with(head) && message.ends_with(tail)) << message;
    const std::string count = message.substr(head.size(), message.size() - head.size() - tail.size());
    ASSERT_TRUE(!count.empty() && count.find_first_not_of("0123456789") == std::string::npos) << message;
    EXPECT_GT(std::stol(count), 63);

    const auto o = post_json(client, "/v1/chat/completions", openai("tiny-toolcaller", prose(200), 100, stream));
    EXPECT_EQ(o.status, 400) << o.text;
    ASSERT_TRUE(o.body.is_object()) << o.text;
    EXPECT_EQ(o.body["error"]["code"], "context_length_exceeded");
    EXPECT_EQ(o.body["error"]["type"], "invalid_request_error");
  }
  // A prompt that fits is served as usual.
  const auto ok = post_json(client, "/v1/messages", anthropic("tiny-toolcaller", "hi", 5, false));
  EXPECT_EQ(ok.status, 200) << ok.text;
  EXPECT_EQ(server.log().find(" 500 "), std::string::npos);
}

TEST(ServeContext, MaxTokensIsClampedToTheRoomTheContextLeaves) {
  TempDir dir;
  ServerProcess server({"--model", random_talker(dir).string(), "--context", "96"});
  auto client = server.client();
  // Greedy, so the turn cannot end early: sampled random weights reach the end token now and then.
  json request = anthropic("random-talker", "Tell me about rivers.", 30000, false);
  request["temperature"] = 0;
  const auto r = post_json(client, "/v1/messages", request);
  ASSERT_EQ(r.status, 200) << r.text;
  const int64_t in = r.body["usage"]["input_tokens"].get<int64_t>() + r.body["usage"]["cache_read_input_tokens"].get<int64_t>();
  const int64_t out = r.body["usage"]["output_tokens"].get<int64_t>();
  EXPECT_EQ(r.body["stop_reason"], "max_tokens");
  EXPECT_EQ(in + out, 96) << r.text;
}

// The "cancelled ..." log line of the turn a client abandoned: tokens prefilled before it stopped.
// (No std::regex: GCC 12 warns inside it under ASan.)
std::pair<long, long> cancelled_progress(const std::string& log) {
  const std::string marker = "cancelled (client gone) after ";
  const size_t at = log.find(marker);
  if (at == std::string::npos) return {-1, -1};
  size_t end = 0;
  const long done = std::stol(log.substr(at + marker.size()), &end);
  const size_t of = at + marker.size() + end;
  if (log.compare(of, 4, " of ") != 0) return {-1, -1};
  return {done, std::stol(log.substr(of + 4))};
}

void expect_abandoned_prefill_stops(bool stream) {
  ServerProcess server;
  const std::string body = anthropic("tiny-toolcaller", prose(6000), 50, stream).dump();
  // A stream is left once its message_start arrives (the prefill has begun), with a reset: a clean
  // close is seen only at the stream's next write, a ping up to 5 s later, which this prefill on
  // uninstrumented kernels does not outlast. A plain request is left at once (the server's probe
  // finds a clean close).
  const std::string head = read_then_hang_up(server.port(), "/v1/messages", body, stream ? 40 : 0, stream);
  if (stream) {
    EXPECT_NE(head.find("200 OK"), std::string::npos) << head;
  }

  // A plain request is still being rendered when the client has gone; wait for its turn to end.
  for (int i = 0; i < 600 && cancelled_progress(server.log()).second < 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto client = server.client();
  const auto t0 = std::chrono::steady_clock::now();
  const auto next = post_json(client, "/v1/messages", anthropic("tiny-toolcaller", "hi", 5, false));
  EXPECT_EQ(next.status, 200) << next.text;
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto [done, total] = cancelled_progress(server.log());
  ASSERT_GT(total, 0) << server.log();
  EXPECT_LT(done, total) << "the abandoned prefill ran to its end";
  std::printf("%s: stopped after %ld of %ld prompt tokens; the next request was answered %.2f s later\n",
              stream ? "stream" : "plain", done, total, waited);
}

TEST(ServeContext, ClientLeavingDuringAStreamedPrefillFreesTheEngine) { expect_abandoned_prefill_stops(true); }
TEST(ServeContext, ClientLeavingDuringAPlainPrefillFreesTheEngine) { expect_abandoned_prefill_stops(false); }

}  // namespace
}  // namespace keel::test
