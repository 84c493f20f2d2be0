// The prefix-aware routing signal (issue #36, docs/deploy.md): a small router follows three
// replicas' /kv/events, asks one replica for a new request's block hashes (/kv/prefix/...), and
// sends each new session to the replica holding the longest prefix of it. The events predict the
// hits: the replica it picks reads the predicted whole blocks from cache (and at most the rest of
// the last one, from the sequence the earlier session left live), the others hold none of it.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;

// One replica as the router sees it: the hashes it holds, kept up to date by its events.
struct ReplicaView {
  explicit ReplicaView(const ServerProcess& s) : server(s) {}
  const ServerProcess& server;
  std::string instance;
  uint64_t seq = 0;
  std::multiset<std::string> hashes;
  int snapshots = 0;

  void snapshot() {
    auto client = server.client();
    auto res = client.Get("/kv/blocks");
    ASSERT_TRUE(res && res->status == 200);
    const json body = json::parse(res->body);
    instance = body["instance"];
    seq = body["seq"];
    hashes.clear();
    for (const auto& h : body["hashes"]) hashes.insert(h.get<std::string>());
    ++snapshots;
  }
  void follow() {
    auto client = server.client();
    auto res = client.Get(("/kv/events?after=" + std::to_string(seq)).c_str());
    ASSERT_TRUE(res);
    if (res->status == 410) return snapshot();
    ASSERT_EQ(res->status, 200) << res->body;
    const json body = json::parse(res->body);
    ASSERT_EQ(body["instance"], instance);
    for (const auto& e : body["events"]) {
      if (e["type"] == "stored")
        hashes.insert(e["hash"].get<std::string>());
      else if (auto it = hashes.find(e["hash"].get<std::string>()); it != hashes.end())
        hashes.erase(it);
    }
    seq = body["seq"];
  }
  int64_t cached_tokens(const json& prefix) const {
    int64_t blocks = 0;
    while (blocks < static_cast<int64_t>(prefix.size()) && hashes.contains(prefix[static_cast<size_t>(blocks)].get<std::string>()))
      ++blocks;
    return blocks * 16;
  }
};

// A project's session: its own system prompt (from its first words on), one question.
json project_request(const std::string& project, const std::string& question) {
  return {{"model", "tiny-toolcaller"},
          {"max_tokens", 8},
          {"temperature", 0},
          {"system", "Project " + project + ". You maintain the " + project + " service. " + prose(1200)},
          {"messages", {{{"role", "user"}, {"content", question}}}}};
}

TEST(ServeKvEvents, EventsPredictWhichReplicaHoldsANewSessionsPrefix) {
  const auto binary = release_binary();
  std::vector<std::unique_ptr<ServerProcess>> servers;
  std::vector<ReplicaView> replicas;
  for (int i = 0; i < 3; ++i) servers.push_back(std::make_unique<ServerProcess>(std::vector<std::string>{"--threads", "1"},
                                                                                 std::vector<std::string>{}, binary));
  for (auto& s : servers) replicas.emplace_back(*s);
  for (auto& r : replicas) r.snapshot();

  // One project per replica, seeded there.
  const std::vector<std::string> projects = {"alpha", "beta", "gamma"};
  for (size_t p = 0; p < projects.size(); ++p) {
    auto client = servers[p]->client();
    ASSERT_EQ(post_json(client, "/v1/messages", project_request(projects[p], "What does it do?")).status, 200);
  }

  // New sessions of each project, routed by the signal alone.
  int within_block = 0, sessions = 0;
  for (const size_t p : {1, 2, 0, 2, 0, 1}) {
    const json request = project_request(projects[p], "Session " + std::to_string(sessions) + ": where are the tests?");
    for (auto& r : replicas) r.follow();
    auto any = servers[0]->client();
    const JsonResponse prefix = post_json(any, "/kv/prefix/v1/messages", request);
    ASSERT_EQ(prefix.status, 200) << prefix.text;
    EXPECT_EQ(prefix.body["block_tokens"], 16);
    EXPECT_EQ(prefix.body["hashes"].size(), (prefix.body["prompt_tokens"].get<size_t>() - 1) / 16);
    size_t best = 0;
    std::vector<int64_t> predicted;
    for (size_t r = 0; r < replicas.size(); ++r) {
      predicted.push_back(replicas[r].cached_tokens(prefix.body["hashes"]));
      if (predicted[r] > predicted[best]) best = r;
    }
    EXPECT_EQ(best, p) << "the project's prefix is on its seed replica";
    for (size_t r = 0; r < replicas.size(); ++r)
      if (r != p) { EXPECT_EQ(predicted[r], 0) << "replica " << r << " never saw project " << projects[p]; }
    EXPECT_GE(predicted[best], 1200);

    auto chosen = servers[best]->client();
    const JsonResponse answer = post_json(chosen, "/v1/messages", request);
    ASSERT_EQ(answer.status, 200) << answer.text;
    const int64_t hit = answer.body["usage"]["cache_read_input_tokens"];
    EXPECT_GE(hit, predicted[best]);
    EXPECT_LT(hit, predicted[best] + 16);
    within_block += hit >= predicted[best] && hit < predicted[best] + 16 ? 1 : 0;
    ++sessions;
  }
  std::printf("\nevents predicted the cached tokens of %d of %d new sessions to within the last partial block\n",
              within_block, sessions);

  // A reader behind the log, or following another process, is told to start over.
  auto client = servers[0]->client();
  auto gone = client.Get(("/kv/events?after=" + std::to_string(replicas[0].seq + 1000000)).c_str());
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->status, 410);
  replicas[0].follow();
  replicas[0].follow();
  EXPECT_EQ(replicas[0].snapshots, 1);
  auto bad = client.Get("/kv/events?after=-1");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
}

}  // namespace
}  // namespace keel::test
