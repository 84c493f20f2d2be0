// Bounded memory per request (docs/serve.md, "Limits and security"): requests are parsed, rendered
// and tokenized under one byte budget (api/preparation_gate.h), so a burst of the largest bodies
// cannot take more than that budget, and what they took goes back to the OS afterwards.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "keel/api/preparation_gate.h"
#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;
using api::PreparationGate;
using namespace std::chrono_literals;

TEST(ReliabilityMemory, GateKeepsAtLeastOneLargestBody) {
  const size_t max_body = 1 << 20;
  EXPECT_EQ(PreparationGate(0, max_body).budget_bytes(), api::preparation_cost(max_body));
  EXPECT_EQ(PreparationGate(size_t{10} << 30, max_body).budget_bytes(), size_t{10} << 30);
  EXPECT_EQ(api::preparation_cost(0), api::kPreparationMinBytes);
  EXPECT_EQ(api::preparation_cost(max_body), max_body * api::kPreparationBytesPerBodyByte);
}

TEST(ReliabilityMemory, GateAdmitsWhatFitsAndTimesOutTheRest) {
  const size_t body = 1 << 20;
  PreparationGate gate(2 * api::preparation_cost(body), body);
  auto a = gate.enter(body, 0ms);
  auto b = gate.enter(body, 0ms);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(gate.used_bytes(), gate.budget_bytes());
  EXPECT_FALSE(gate.enter(body, 20ms)) << "a third largest body fits no budget of two";
  EXPECT_FALSE(gate.enter(0, 20ms)) << "even a small body waits while the budget is spent";
  EXPECT_EQ(gate.waiting(), 0u);
  a.reset();
  auto c = gate.enter(body, 0ms);
  EXPECT_TRUE(c);
  b.reset();
  c.reset();
  EXPECT_EQ(gate.used_bytes(), 0u);
}

TEST(ReliabilityMemory, GateServesWaitersInArrivalOrder) {
  const size_t body = 1 << 20;
  PreparationGate gate(api::preparation_cost(body), body);
  auto holder = gate.enter(body, 0ms);
  ASSERT_TRUE(holder);
  std::mutex mutex;
  std::vector<int> order;
  // A large body waits first; a small one arriving later must not pass it, or a stream of small
  // requests could starve a large one forever.
  auto large = std::async(std::launch::async, [&] {
    auto t = gate.enter(body, 10s);
    std::lock_guard lock(mutex);
    order.push_back(1);
    return t.has_value();
  });
  while (gate.waiting() < 1) std::this_thread::sleep_for(1ms);
  auto small = std::async(std::launch::async, [&] {
    auto t = gate.enter(0, 10s);
    std::lock_guard lock(mutex);
    order.push_back(2);
    return t.has_value();
  });
  while (gate.waiting() < 2) std::this_thread::sleep_for(1ms);
  holder.reset();
  EXPECT_TRUE(large.get());
  EXPECT_TRUE(small.get());
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_EQ(gate.used_bytes(), 0u);
}

TEST(ReliabilityMemory, GateForgetsAWaiterThatGaveUp) {
  const size_t body = 1 << 20;
  PreparationGate gate(api::preparation_cost(body), body);
  auto holder = gate.enter(body, 0ms);
  EXPECT_FALSE(gate.enter(body, 10ms));  // gave up first in line
  auto later = std::async(std::launch::async, [&] { return gate.enter(0, 10s).has_value(); });
  while (gate.waiting() < 1) std::this_thread::sleep_for(1ms);
  holder.reset();
  EXPECT_TRUE(later.get()) << "the waiter behind one that timed out must still get its turn";
}

// One client's large body must not hold up small requests that fit beside what is already
// held, nor may small requests keep the large one waiting once the room it needs is given back.
TEST(ReliabilityMemory, GateLetsSmallRequestsPastALargeOneWithoutStarvingIt) {
  const size_t unit = 1 << 20;  // a body whose share is a quarter of the budget
  PreparationGate gate(4 * api::preparation_cost(unit), unit);
  auto before = gate.enter(3 * unit, 0ms);
  ASSERT_TRUE(before);
  auto large = std::async(std::launch::async, [&] { return gate.enter(4 * unit, 10s); });
  while (gate.waiting() < 1) std::this_thread::sleep_for(1ms);
  auto passed = gate.enter(unit, 0ms);
  EXPECT_TRUE(passed) << "a small body that fits beside what was held before the large one passes it";
  before.reset();
  // The large one now waits only for `passed`: a small body that fits must wait behind it.
  EXPECT_FALSE(gate.enter(unit, 50ms)) << "the large body would wait for as long as small ones keep coming";
  std::atomic<bool> behind_entered{false};
  auto behind = std::async(std::launch::async, [&] {
    auto t = gate.enter(unit, 10s);
    behind_entered = true;
    return t;
  });
  while (gate.waiting() < 2) std::this_thread::sleep_for(1ms);
  passed.reset();
  auto large_ticket = large.get();
  ASSERT_TRUE(large_ticket);
  EXPECT_FALSE(behind_entered);
  EXPECT_EQ(gate.used_bytes(), gate.budget_bytes());
  large_ticket.reset();
  EXPECT_TRUE(behind.get());
  EXPECT_EQ(gate.used_bytes(), 0u);
}

int64_t proc_status_bytes(int pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1)) * 1024;
  return -1;
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

// The keel whose memory is measured: this build's own, or, when this build is sanitized, the
// optimised one scripts/test.sh builds beside it. ASan's allocator keeps freed memory in quarantine
// and never hands it to malloc_trim, so a sanitized server has a peak of its own and keeps what it
// took; the bound docs/serve.md states is about the keel people run.
std::filesystem::path measured_binary() {
  if (!kSanitized) return keel_binary();
  const std::filesystem::path release = release_binary();
  if (release.empty() || !std::filesystem::exists(release))
    ADD_FAILURE() << "this build is sanitized and has no optimised keel to measure ('" << release.string()
                  << "'): configure with -DKEEL_RELEASE_BINARY=path/to/build/keel, as scripts/test.sh does";
  return release;
}

// The costliest body we know per byte: digits, which the Qwen2 pre-tokenizer cuts one by one, so
// every byte is a word and a token (docs/serve.md gives the measured bytes per body byte).
std::string digit_body(const std::string& path, size_t bytes) {
  json request = {{"model", "tiny-toolcaller"}, {"messages", {{{"role", "user"}, {"content", ""}}}}};
  if (path == "/v1/messages") request["max_tokens"] = 1;
  const size_t overhead = request.dump().size();
  std::string digits;
  for (size_t i = 0; i + overhead < bytes; ++i) digits += static_cast<char>('0' + i % 10);
  request["messages"][0]["content"] = digits;
  return request.dump();
}

TEST(ReliabilityMemory, EightLargeBodiesAtOnceStayUnderTheBudget) {
  // Bodies of half the 1 MiB limit, under --memory 0.5: the budget (what the ceiling leaves beside
  // the tiny model, at least one 1 MiB body's share) holds two of them at a time.
  const size_t body_bytes = 512 << 10;
  const std::filesystem::path binary = measured_binary();
  if (binary.empty()) return;
  ServerProcess server({"--max-body-mb", "1", "--memory", "0.5"}, {}, binary);
  auto client = server.client();
  auto health = client.Get("/health");
  ASSERT_TRUE(health && health->status == 200);
  const auto budget = json::parse(health->body)["preparation"]["budget_bytes"].get<int64_t>();
  const int64_t cost = static_cast<int64_t>(api::preparation_cost(body_bytes));
  ASSERT_GE(budget, 2 * cost);
  ASSERT_LT(budget, 4 * cost) << "the test needs a budget of a few bodies, not eight";

  const std::string messages = digit_body("/v1/messages", body_bytes);
  const std::string count = digit_body("/v1/messages/count_tokens", body_bytes);
  ASSERT_LE(messages.size(), body_bytes);
  const int64_t base = proc_status_bytes(server.pid(), "VmRSS");

  // One alone: what a single largest body really takes here.
  auto alone = server.client().Post("/v1/messages/count_tokens", count, "application/json");
  ASSERT_TRUE(alone);
  ASSERT_EQ(alone->status, 200) << alone->body;
  const int64_t one = proc_status_bytes(server.pid(), "VmHWM") - base;

  std::vector<std::future<int>> answers;
  for (int i = 0; i < 8; ++i)
    answers.push_back(std::async(std::launch::async, [&, i] {
      auto c = server.client();
      auto r = i % 2 ? c.Post("/v1/messages/count_tokens", count, "application/json")
                     : c.Post("/v1/messages", messages, "application/json");
      return r ? r->status : -1;
    }));
  for (int i = 0; i < 8; ++i) {
    const int status = answers[static_cast<size_t>(i)].get();
    // The Messages requests hold about half a million tokens: too long for the context, refused
    // only after they were tokenized, so each took its full share.
    EXPECT_EQ(status, i % 2 ? 200 : 400) << "request " << i;
  }
  const int64_t peak = proc_status_bytes(server.pid(), "VmHWM") - base;
  // What the HTTP layer holds besides: each body once as read, once more while its handler runs.
  const int64_t bodies = 8 * 2 * static_cast<int64_t>(body_bytes);
  const int64_t slots = budget / cost;
  std::printf("one body: +%lld MiB; eight at once: +%lld MiB; budget %lld MiB (%lld at a time)\n",
              static_cast<long long>(one >> 20), static_cast<long long>(peak >> 20), static_cast<long long>(budget >> 20),
              static_cast<long long>(slots));
  EXPECT_LE(peak, (slots + 1) * one + bodies + (16 << 20)) << "more than the gate's share ran at once";
  EXPECT_LE(peak, budget + bodies + (16 << 20)) << "the stated bound (docs/serve.md)";
  // What they took is handed back (malloc_trim), not kept at the peak.
  std::this_thread::sleep_for(200ms);
  const int64_t kept = proc_status_bytes(server.pid(), "VmRSS") - base;
  EXPECT_LE(kept, 32 << 20) << "kept " << (kept >> 20) << " MiB after the burst";
}

}  // namespace
}  // namespace keel::test
