// keel serve's disk tier and warm-up, end to end on a real server: with --kv-disk the first turn
// after a restart reuses the prompt the previous process prefilled (and answers the same, greedy);
// --capture-requests saves a request body that --warm prefills at start, so the first real request
// sharing its system prompt and tools is a cache hit; /health and /metrics show both.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

json health(const ServerProcess& server) {
  auto client = server.client();
  const auto r = client.Get("/health");
  return r && r->status == 200 ? json::parse(r->body) : json();
}

json request_with(const std::string& system, const std::string& ask) {
  json request = session_fixture()["cases"][0]["request"];
  request["system"] = system;
  request["max_tokens"] = 8;
  request["temperature"] = 0;
  request["stream"] = false;
  request["messages"] = json::array({{{"role", "user"}, {"content", ask}}});
  return request;
}

TEST(ServeKvDisk, FirstTurnAfterARestartIsACacheHitWithTheSameAnswer) {
  TempDir disk;
  const json request = request_with(prose(800), "What files are in /tmp?");
  json first;
  {
    ServerProcess server({"--kv-disk", disk.path().string(), "--kv-disk-gb", "1"});
    auto client = server.client(std::chrono::seconds(600));
    const JsonResponse r = post_json(client, "/v1/messages", request);
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["usage"]["cache_read_input_tokens"], 0);
    first = r.body;
    const json h = health(server);
    ASSERT_TRUE(h["kv"]["disk"].is_object()) << h.dump();
    EXPECT_EQ(h["kv"]["disk"]["cap_bytes"], int64_t{1} << 30);
    EXPECT_EQ(server.signal_and_wait(SIGTERM, std::chrono::seconds(60)), 0);
  }
  ServerProcess server({"--kv-disk", disk.path().string(), "--kv-disk-gb", "1"});
  auto client = server.client(std::chrono::seconds(600));
  const JsonResponse r = post_json(client, "/v1/messages", request);
  ASSERT_EQ(r.status, 200) << r.text;
  const int64_t prompt = r.body["usage"]["input_tokens"].get<int64_t>() + r.body["usage"]["cache_read_input_tokens"].get<int64_t>();
  EXPECT_GE(r.body["usage"]["cache_read_input_tokens"].get<int64_t>(), prompt - 16) << r.body["usage"].dump();
  EXPECT_EQ(r.body["content"], first["content"]);  // reuse from disk == fresh prefill: the same greedy answer
  const json d = health(server)["kv"]["disk"];
  EXPECT_GT(d["hits"].get<int64_t>(), 0) << d.dump();
  EXPECT_EQ(d["corrupt"], 0);
  EXPECT_EQ(d["mismatched"], 0);
  const auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("keel_kv_disk_hits "), std::string::npos);
  EXPECT_NE(metrics->body.find("keel_kv_disk_files "), std::string::npos);
}

TEST(ServeWarm, CapturedRequestPrefilledAtStartMakesTheFirstRequestACacheHit) {
  TempDir captures;
  const std::string system = prose(1500);
  const json captured = request_with(system, "What files are in /tmp?");
  {
    ServerProcess server({"--capture-requests", captures.path().string()});
    auto client = server.client(std::chrono::seconds(600));
    ASSERT_EQ(post_json(client, "/v1/messages", captured).status, 200);
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(captures.path())) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(json::parse(read_text(files[0])), captured);
  EXPECT_EQ(fs::status(files[0]).permissions() & (fs::perms::group_all | fs::perms::others_all), fs::perms::none);

  ServerProcess server({"--warm", files[0].string()});
  json h;
  for (int i = 0; i < 600; ++i) {
    h = health(server);
    if (h.is_object() && !h["warming"].get<bool>()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(h["warming"].get<bool>()) << h.dump();
  EXPECT_EQ(h["warmup"]["requests"], 1);
  EXPECT_EQ(h["warmup"]["done"], 1);
  EXPECT_EQ(h["warmup"]["failed"], 0);
  EXPECT_GT(h["warmup"]["prompt_tokens"].get<int64_t>(), 1500);

  // The first real request: the same system prompt and tools, another question.
  auto client = server.client(std::chrono::seconds(600));
  const JsonResponse r = post_json(client, "/v1/messages", request_with(system, "Run pwd"));
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_GT(r.body["usage"]["cache_read_input_tokens"].get<int64_t>(), 1500) << r.body["usage"].dump();
}

// A warm-up is a background turn: a real request that arrives while it prefills suspends it (and
// is answered), and the warm-up then finishes what it started.
TEST(ServeWarm, ARealRequestDoesNotWaitForTheWarmUp) {
  TempDir dir;
  const fs::path warm = dir.path() / "warm.json";
  const std::string system = prose(10000);
  { std::ofstream(warm) << request_with(system, "What files are in /tmp?").dump(); }
  ServerProcess server({"--warm", warm.string()});
  auto client = server.client(std::chrono::seconds(600));
  // Wait until the warm-up runs.
  json h;
  for (int i = 0; i < 2000; ++i) {
    h = health(server);
    if (h.is_object() && h["queue"]["running"].get<int>() == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(h["warming"].get<bool>()) << "the warm-up finished before the test went on";
  const JsonResponse r = post_json(client, "/v1/messages", request_with("You are terse.", "Say hi."));
  ASSERT_EQ(r.status, 200) << r.text;
  h = health(server);
  EXPECT_GE(h["warmup"]["yields"].get<int64_t>(), 1) << h.dump();
  for (int i = 0; i < 6000 && h["warming"].get<bool>(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    h = health(server);
  }
  ASSERT_FALSE(h["warming"].get<bool>()) << h.dump();
  EXPECT_EQ(h["warmup"]["done"], 1);
  EXPECT_EQ(h["warmup"]["failed"], 0);
  const JsonResponse hit = post_json(client, "/v1/messages", request_with(system, "Run pwd"));
  ASSERT_EQ(hit.status, 200) << hit.text;
  EXPECT_GT(hit.body["usage"]["cache_read_input_tokens"].get<int64_t>(), 10000) << hit.body["usage"].dump();
}

// A warm file that is not a request stops the server before the model loads, naming the file.
TEST(ServeWarm, ARequestFileThatIsNoRequestIsRefusedAtStart) {
  TempDir dir;
  const fs::path bad = dir.path() / "bad.json";
  { std::ofstream(bad) << R"({"hello": "world"})"; }
  const CommandResult r =
      run_command(keel_binary().string() + " serve --model " + tiny_toolcaller_dir().string() + " --port 0 --warm " +
                  bad.string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("bad.json"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("neither an Anthropic Messages request"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace keel::test
