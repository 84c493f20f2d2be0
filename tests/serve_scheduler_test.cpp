// Many turns at once through keel serve's step scheduler (engine/scheduler.h): requests that run
// beside others get the tokens they get alone, a short request is answered while a long prompt
// prefills, a KV pool too small for everyone preempts without losing or changing anything, an
// agent keeps its live sequence through a burst of subagents, 64 streams at once all finish, and
// the choices of one request (n) share its prompt.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <thread>

#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Sampled at temperature 1 with a seed: a logit that moved by a bit would sooner or later move a
// token, so equal answers mean equal logits all along.
json seeded(const std::string& model, const std::string& text, int max_tokens, uint64_t seed) {
  return {{"model", model}, {"max_tokens", max_tokens}, {"temperature", 1.0}, {"seed", seed},
          {"messages", json::array({{{"role", "user"}, {"content", text}}})}};
}

std::string answer_of(const JsonResponse& r) {
  if (r.status != 200) return "HTTP " + std::to_string(r.status) + ": " + r.text;
  return r.body["choices"][0]["message"]["content"].get<std::string>() + " | " +
         r.body["choices"][0]["finish_reason"].get<std::string>() + " | " +
         std::to_string(r.body["usage"]["completion_tokens"].get<int64_t>());
}

// Every choice whole (text, calls without their random ids, logprobs, finish) and the usage.
std::string choices_of(const JsonResponse& r) {
  if (r.status != 200) return "HTTP " + std::to_string(r.status) + ": " + r.text;
  json choices = r.body["choices"];
  for (json& c : choices)
    if (c["message"].contains("tool_calls"))
      for (json& call : c["message"]["tool_calls"]) call.erase("id");
  return choices.dump() + " | " + r.body["usage"]["completion_tokens"].dump();
}

// Each request alone, one after another, then all at once on a fresh server: the same answers
// (`gist` says what of an answer is compared). Returns what /health's scheduler said after they
// ran together.
json expect_alone_equals_together(const std::vector<std::string>& flags, const std::vector<json>& requests,
                                  std::string (*gist)(const JsonResponse&) = answer_of) {
  std::vector<std::string> alone;
  {
    ServerProcess server(flags);
    auto client = server.client();
    for (const json& r : requests) alone.push_back(gist(post_json(client, "/v1/chat/completions", r)));
  }
  ServerProcess server(flags);
  std::vector<std::future<std::string>> together;
  for (const json& r : requests)
    together.push_back(std::async(std::launch::async, [&server, r, gist] {
      auto client = server.client();
      return gist(post_json(client, "/v1/chat/completions", r));
    }));
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::string got = together[i].get();
    EXPECT_EQ(got, alone[i]) << "request " << i;
    EXPECT_EQ(got.rfind("HTTP", 0), std::string::npos) << got;
  }
  auto health = server.client().Get("/health");
  if (!health) return nullptr;
  return json::parse(health->body)["scheduler"];
}

class ServeBatchInvariance : public ::testing::TestWithParam<const char*> {};

TEST_P(ServeBatchInvariance, ConcurrentRequestsGetTheTokensTheyGetAlone) {
  TempDir dir;
  const std::string talker = random_talker(dir).string();
  std::vector<json> requests;
  for (int i = 0; i < 4; ++i)
    requests.push_back(seeded("random-talker", prose(20 + 90 * static_cast<size_t>(i)) + " Request " + std::to_string(i),
                              24 + 8 * i, 1000 + static_cast<uint64_t>(i)));
  const json sched = expect_alone_equals_together({"--model", talker, "--kv-policy", GetParam(), "--parallel", "4"}, requests);
  // They did share steps: some pass ran more than one turn.
  EXPECT_GT(sched.value("largest_batch", 0), 1) << sched.dump();
}

INSTANTIATE_TEST_SUITE_P(Policies, ServeBatchInvariance, ::testing::Values("full", "int8", "protect"));

// The same with everything the sampling API adds: a structured answer, a constrained and required
// tool call, penalties and a bias, logprobs and several choices, all sampled at temperature 1.
TEST(ServeScheduler, GrammarsPenaltiesLogprobsAndChoicesAreBatchInvariant) {
  const json weather = json::parse(R"({"type":"object","properties":{"city":{"type":"string"},
      "temperature_c":{"type":"number"},"conditions":{"enum":["sunny","cloudy","rain"]}},
      "required":["city","temperature_c","conditions"],"additionalProperties":false})");
  const json tools = json::parse(R"([{"type":"function","function":{"name":"Bash","strict":true,"parameters":{
      "type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"integer"}},"required":["command"]}}}])");
  std::vector<json> requests;
  json structured = seeded("tiny-toolcaller", "What is the weather in Paris? Answer as JSON.", 60, 5);
  structured["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "weather"}, {"schema", weather}}}};
  structured["logprobs"] = true;
  structured["top_logprobs"] = 3;
  requests.push_back(structured);
  json call = seeded("tiny-toolcaller", "List the files in /tmp. " + prose(60), 60, 6);
  call["tools"] = tools;
  call["tool_choice"] = "required";
  requests.push_back(call);
  json penalised = seeded("tiny-toolcaller", prose(150) + " Summarise.", 40, 7);
  penalised["presence_penalty"] = 0.8;
  penalised["frequency_penalty"] = 0.5;
  penalised["repetition_penalty"] = 1.3;
  penalised["logit_bias"] = {{"198", -5}, {"13", 3}};
  penalised["logprobs"] = true;
  requests.push_back(penalised);
  json choices = seeded("tiny-toolcaller", prose(90) + " Go on.", 24, 8);
  choices["n"] = 3;
  requests.push_back(choices);
  const json sched = expect_alone_equals_together({"--parallel", "4"}, requests, choices_of);
  EXPECT_GT(sched.value("largest_batch", 0), 1) << sched.dump();
}

// An HTTP request over a plain socket whose answer is read as it arrives: when the first byte of
// `marker` came, and when the chunked body ended.
class WatchedStream {
 public:
  WatchedStream(int port, const std::string& path, const std::string& body, std::string marker)
      : sent_(Clock::now()) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) throw std::runtime_error("connect");
    const std::string request = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    if (send(fd_, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size()))
      throw std::runtime_error("send");
    reader_ = std::async(std::launch::async, [this, marker = std::move(marker)] {
      std::string got;
      char buf[16384];
      while (true) {
        const ssize_t n = recv(fd_, buf, sizeof buf, 0);
        if (n <= 0) break;
        got.append(buf, static_cast<size_t>(n));
        if (!first_ && got.find(marker) != std::string::npos) first_ = Clock::now();
      }
      ended_ = Clock::now();
      return got;
    });
  }
  ~WatchedStream() {
    if (reader_.valid()) reader_.wait();
    close(fd_);
  }
  std::string answer() { return reader_.get(); }  // after the server closed the connection
  Clock::duration to_marker() const { return first_ ? *first_ - sent_ : Clock::duration::max(); }
  Clock::time_point marker_time() const { return first_ ? *first_ : Clock::time_point::max(); }

 private:
  int fd_ = -1;
  Clock::time_point sent_;
  std::optional<Clock::time_point> first_;
  std::optional<Clock::time_point> ended_;
  std::future<std::string> reader_;
};

json stream_request(const std::string& text, int max_tokens) {
  return {{"model", "tiny-toolcaller"}, {"max_tokens", max_tokens}, {"stream", true}, {"temperature", 0},
          {"messages", json::array({{{"role", "user"}, {"content", text}}})}};
}

TEST(ServeScheduler, AShortRequestIsAnsweredWhileALongPromptPrefills) {
  ServerProcess server;
  auto client = server.client();
  // A 10k-token prompt prefills in 40 chunks; its first token comes only after all of them.
  WatchedStream long_one(server.port(), "/v1/messages", stream_request(prose(10000), 4).dump(), "content_block_delta");
  // Wait until it runs (and has not produced a token yet).
  for (int i = 0; i < 1000; ++i) {
    auto h = client.Get("/health");
    if (h && json::parse(h->body)["queue"]["running"].get<int>() == 1) break;
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_EQ(long_one.marker_time(), Clock::time_point::max()) << "the long prompt prefilled before the test went on";
  WatchedStream short_one(server.port(), "/v1/messages", stream_request("Say hi.", 4).dump(), "content_block_delta");
  const std::string short_answer = short_one.answer();
  const std::string long_answer = long_one.answer();
  EXPECT_NE(short_answer.find("event: message_stop"), std::string::npos) << short_answer;
  EXPECT_NE(long_answer.find("event: message_stop"), std::string::npos) << long_answer.substr(0, 400);
  // The short request's first token came while the long prompt was still prefilling: it shared
  // steps with the long prefill instead of waiting for it.
  EXPECT_LT(short_one.marker_time(), long_one.marker_time());
  std::printf("first token: short request %.0f ms after it was sent, long prompt %.0f ms\n",
              std::chrono::duration<double, std::milli>(short_one.to_marker()).count(),
              std::chrono::duration<double, std::milli>(long_one.to_marker()).count());
}

TEST(ServeScheduler, ATinyKvPoolPreemptsWithoutLosingOrChangingAnything) {
  TempDir dir;
  const std::string talker = random_talker(dir).string();
  // A pool of one 1024-token context (2 MiB at bf16, and a pass in flight), four turns of about 500 tokens each at
  // once: they cannot all hold their rows, so some wait and resume.
  const std::vector<std::string> flags = {"--model", talker, "--context", "1024", "--kv-memory", "0.0025", "--parallel", "4"};
  std::vector<json> requests;
  for (int i = 0; i < 4; ++i) {
    json r = seeded("random-talker", prose(300) + " Turn " + std::to_string(i), 200, 77 + static_cast<uint64_t>(i));
    r["temperature"] = 0;  // greedy random weights run to max_tokens
    requests.push_back(r);
  }
  const json sched = expect_alone_equals_together(flags, requests);
  EXPECT_GT(sched.value("preemptions", 0), 0) << sched.dump();
}

json agent_turn(const json& messages) {
  return {{"model", "tiny-toolcaller"}, {"max_tokens", 24}, {"temperature", 0},
          {"system", "You are a coding agent. " + prose(200)}, {"messages", messages}};
}

TEST(ServeScheduler, AnAgentKeepsItsLiveSequenceThroughABurstOfSubagents) {
  // Two running turns at a time: the burst comes faster than it drains, so live sequences pile up.
  ServerProcess server({"--parallel", "2"});
  auto client = server.client();
  const httplib::Headers main_agent = {{"x-claude-code-agent-id", "main"}};
  json messages = json::array({{{"role", "user"}, {"content", "Look at the repository. " + prose(100)}}});
  const JsonResponse first = post_json(client, "/v1/messages", agent_turn(messages), main_agent);
  ASSERT_EQ(first.status, 200) << first.text;
  const int64_t first_prompt = first.body["usage"]["input_tokens"].get<int64_t>() +
                               first.body["usage"]["cache_read_input_tokens"].get<int64_t>();

  // Subagents: the same system prompt, their own questions, each its own agent id, three at once.
  std::vector<std::future<int>> burst;
  for (int i = 0; i < 3; ++i)  // (2 x parallel = 4 live sequences are kept: the main one must stay)
    burst.push_back(std::async(std::launch::async, [&server, i] {
      auto c = server.client();
      const json sub = json::array({{{"role", "user"}, {"content", "Subtask " + std::to_string(i) + ": " + prose(60)}}});
      return post_json(c, "/v1/messages", agent_turn(sub), {{"x-claude-code-agent-id", "sub-" + std::to_string(i)}})
          .status;
    }));
  for (auto& b : burst) EXPECT_EQ(b.get(), 200);

  messages.push_back({{"role", "assistant"}, {"content", first.body["content"]}});
  messages.push_back({{"role", "user"}, {"content", "Now fix the bug."}});
  const JsonResponse second = post_json(client, "/v1/messages", agent_turn(messages), main_agent);
  ASSERT_EQ(second.status, 200) << second.text;
  // The whole first prompt comes from the main agent's live sequence, not only its complete blocks
  // from the prefix cache: only the answer as re-rendered and the new message are prefilled.
  EXPECT_GE(second.body["usage"]["cache_read_input_tokens"].get<int64_t>(), first_prompt) << second.text;

  // Another key never continues it: a request from an unknown agent reuses at most the prefix
  // cache's complete blocks of the shared system prompt.
  const JsonResponse stranger = post_json(client, "/v1/messages", agent_turn(messages), {{"x-claude-code-agent-id", "other"}});
  ASSERT_EQ(stranger.status, 200);
  auto health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_GE(json::parse(health->body)["scheduler"]["live_sequences"].get<int64_t>(), 2) << health->body;
}

TEST(ServeScheduler, SixtyFourStreamsAtOnceAllFinishWithTheSameAnswer) {
  ServerProcess server;
  const json request = stream_request("Write a haiku about rivers.", 16);
  auto solo_client = server.client();
  const auto solo = post_json(solo_client, "/v1/messages", [&] {
    json r = request;
    r["stream"] = false;
    return r;
  }());
  ASSERT_EQ(solo.status, 200);
  std::vector<std::future<std::string>> streams;
  for (int i = 0; i < 64; ++i)
    streams.push_back(std::async(std::launch::async, [&server, &request] {
      auto c = server.client();
      auto res = c.Post("/v1/messages", request.dump(), "application/json");
      if (!res) return std::string("request failed: ") + httplib::to_string(res.error());
      if (res->status != 200) return "HTTP " + std::to_string(res->status) + ": " + res->body;
      try {
        return anthropic_gist(replay_anthropic_stream(parse_sse(res->body))["content"]).dump();
      } catch (const std::exception& e) {
        return std::string("broken stream: ") + e.what();
      }
    }));
  const std::string expected = anthropic_gist(solo.body["content"]).dump();
  for (int i = 0; i < 64; ++i) EXPECT_EQ(streams[static_cast<size_t>(i)].get(), expected) << "stream " << i;
}

// The tokens every step ran, from /metrics.
double step_tokens_run(ServerProcess& server) {
  auto res = server.client().Get("/metrics");
  if (!res) return -1;
  const std::string key = "\nkeel_scheduler_step_tokens ";
  const size_t at = res->body.find(key);
  return at == std::string::npos ? -1 : std::stod(res->body.substr(at + key.size()));
}

// OpenAI n = 3: the prompt runs once and the other two choices reuse its blocks (all but the
// last, incomplete one), and each choice is what a request with its seed gets alone.
TEST(ServeScheduler, ChoicesOfOneRequestShareThePromptsBlocks) {
  ServerProcess server;
  json request = seeded("tiny-toolcaller", prose(400), 6, 21);
  request["n"] = 3;
  auto client = server.client();
  const double before = step_tokens_run(server);
  const JsonResponse r = post_json(client, "/v1/chat/completions", request);
  ASSERT_EQ(r.status, 200) << r.text;
  const double ran = step_tokens_run(server) - before;
  const auto prompt = r.body["usage"]["prompt_tokens"].get<double>();
  ASSERT_EQ(r.body["choices"].size(), 3u);
  // The prompt once, at most a block's worth (16 tokens) again for each other choice, their outputs.
  EXPECT_LE(ran, prompt + 2 * 16 + 3 * 6) << "prompt " << prompt;
  EXPECT_GT(prompt, 300);
  for (int i = 0; i < 3; ++i) {
    json single = request;
    single.erase("n");
    single["seed"] = 21 + i;
    const JsonResponse alone = post_json(client, "/v1/chat/completions", single);
    ASSERT_EQ(alone.status, 200) << alone.text;
    EXPECT_EQ(r.body["choices"][i]["message"], alone.body["choices"][0]["message"]) << "choice " << i;
  }
}

}  // namespace
}  // namespace keel::test
