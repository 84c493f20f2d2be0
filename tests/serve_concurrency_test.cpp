// Many clients at once, a full queue, and clients that leave mid-stream.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <unistd.h>

#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;

json request(const std::string& text, int max_tokens, bool stream = false) {
  return {{"model", "tiny-toolcaller"}, {"max_tokens", max_tokens}, {"stream", stream}, {"temperature", 1.0},
          {"messages", json::array({{{"role", "user"}, {"content", text}}})}};
}

TEST(ServeConcurrency, SixteenClientsAreAllAnswered) {
  ServerProcess server;
  std::vector<int> statuses(16, 0);
  std::vector<std::string> errors(16);
  std::vector<std::thread> clients;
  for (int i = 0; i < 16; ++i) {
    clients.emplace_back([&, i] {
      auto client = server.client();
      const bool openai = i % 2 == 1;
      json body = request("Client " + std::to_string(i) + " says hello.", 8, i % 4 < 2);
      auto res = client.Post(openai ? "/v1/chat/completions" : "/v1/messages", body.dump(), "application/json");
      if (!res) {
        errors[static_cast<size_t>(i)] = httplib::to_string(res.error());
        return;
      }
      statuses[static_cast<size_t>(i)] = res->status;
      if (body["stream"]) {
        // A complete stream, whichever API.
        if (openai) replay_openai_stream(parse_sse(res->body));
        else replay_anthropic_stream(parse_sse(res->body));
      }
    });
  }
  for (auto& t : clients) t.join();
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(statuses[static_cast<size_t>(i)], 200) << "client " << i << ": " << errors[static_cast<size_t>(i)];
}

TEST(ServeConcurrency, AFullQueueAnswersOverloaded) {
  ServerProcess server({"--queue-depth", "1"});
  std::atomic<int> ok{0}, overloaded_anthropic{0}, overloaded_openai{0}, other{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 12; ++i) {
    clients.emplace_back([&, i] {
      auto client = server.client();
      const bool openai = i % 2 == 1;
      auto res = client.Post(openai ? "/v1/chat/completions" : "/v1/messages", request("Tell a long story.", 64).dump(),
                             "application/json");
      if (!res) return (void)++other;
      const json body = json::parse(res->body, nullptr, false);
      if (res->status == 200) {
        ++ok;
      } else if (!openai && res->status == 529 && body["error"]["type"] == "overloaded_error") {
        ++overloaded_anthropic;
      } else if (openai && res->status == 503 && body.contains("error")) {
        ++overloaded_openai;
      } else {
        ++other;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_GE(ok.load(), 1);
  EXPECT_GE(overloaded_anthropic.load() + overloaded_openai.load(), 1);
  EXPECT_EQ(other.load(), 0);
  // And it recovers.
  auto client = server.client();
  EXPECT_EQ(client.Post("/v1/messages", request("hi", 2).dump(), "application/json")->status, 200);
}

TEST(ServeConcurrency, DisconnectMidStreamStopsGenerationAndFreesTheEngine) {
  TempDir dir;
  ServerProcess server({"--model", random_talker(dir).string()});
  json essay = request("Write a very long essay about rivers.", 30000, true);
  essay["model"] = "random-talker";
  essay["temperature"] = 0;  // greedy: the essay cannot end on its own before the hang-up
  const std::string head = read_then_hang_up(server.port(), "/v1/messages", essay.dump(), 600);
  EXPECT_NE(head.find("event: message_start"), std::string::npos) << head;
  // The engine notices at its next write, stops, and serves the next client.
  auto client = server.client();
  json next = request("hi", 2);
  next["model"] = "random-talker";
  const auto t0 = std::chrono::steady_clock::now();
  auto res = client.Post("/v1/messages", next.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The scheduler may answer the next request beside the dying stream, before that stream's
  // next write notices the hang-up and logs it: give the log a few seconds to say so.
  std::string log = server.log();
  for (int i = 0; i < 100 && log.find("cancelled (client gone)") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    log = server.log();
  }
  EXPECT_NE(log.find("cancelled (client gone)"), std::string::npos) << log;
  std::printf("the next request was answered %.2f s after the disconnect\n", waited);
}

// A non-streaming turn whose client sent more after its request (a stray CRLF, as some clients
// send) and then hung up is cancelled, not run to its end.
TEST(ServeConcurrency, AWholeAnswerIsCancelledWhenItsClientLeavesAfterSendingMore) {
  TempDir dir;
  ServerProcess server({"--model", random_talker(dir).string()});
  json essay = request("Write a very long essay about rivers.", 30000);
  essay["model"] = "random-talker";
  essay["temperature"] = 0;  // greedy: the essay cannot end on its own
  const std::string body = essay.dump();
  const int fd = connect_loopback(server.port());
  send_all(fd, "POST /v1/messages HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: " +
                   std::to_string(body.size()) + "\r\n\r\n" + body + "\r\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  close(fd);
  std::string log = server.log();
  for (int i = 0; i < 200 && log.find("cancelled (client gone)") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    log = server.log();
  }
  EXPECT_NE(log.find("cancelled (client gone)"), std::string::npos) << log;
}

}  // namespace
}  // namespace keel::test
