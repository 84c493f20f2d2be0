// keel replicas behind HAProxy (issue #36, docs/deploy.md): session affinity keeps each agent's
// turns on the replica that holds its prefix cache, a replica that dies loses no request that had
// not started streaming, and a replica that drains leaves the pool before its streams end. The
// affinity test serves the bundled model (its answers are tool calls, as an agent's are); the
// failover tests a random-weight copy of it (greedy, it never stops early, so a stream lasts as
// long as its max_tokens asks). What is measured on two cores is routing, caching and failover,
// not throughput: three replicas share the same two cores.
#include <signal.h>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <future>
#include <functional>
#include <map>
#include <set>
#include <numeric>
#include <thread>

#include <httplib.h>

#include "deploy_support.h"
#include "server_support.h"

namespace keel::test {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::ordered_json;

constexpr int kSessions = 12;
constexpr int kTurns = 5;
constexpr int kMaxTokens = 48;

bool haproxy_installed() { return run_command("command -v haproxy", false).exit_code == 0; }

#define REQUIRE_HAPROXY()                                                                                  \
  if (!haproxy_installed()) GTEST_SKIP() << "haproxy is not installed (scripts/install-deps.sh installs it)"

// Every turn of every session, as the client saw it.
struct SessionsRun {
  std::vector<std::vector<StreamedTurn>> turns;  // [session][turn]

  std::vector<double> later(double (*of)(const StreamedTurn&)) const {
    std::vector<double> out;
    for (const auto& session : turns)
      for (size_t t = 1; t < session.size(); ++t) out.push_back(of(session[t]));
    return out;
  }
  int lost() const {
    int n = 0;
    for (const auto& session : turns)
      for (const StreamedTurn& t : session) n += t.complete ? 0 : 1;
    return n;
  }
};

double share_of(const StreamedTurn& t) { return t.cached_share(); }
double ttft_of(const StreamedTurn& t) { return t.seconds_to_first_token; }
double mean(const std::vector<double>& v) { return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / double(v.size()); }

// Turns [first, last) of every session, all sessions at once (one client thread each, as agents
// run side by side); `requests` carries each session's next request from call to call.
void run_turns(int port, std::vector<json>& requests, SessionsRun& run, int first, int last, const std::string& tag) {
  run.turns.resize(requests.size());
  std::vector<std::future<void>> sessions;
  for (size_t s = 0; s < requests.size(); ++s)
    sessions.push_back(std::async(std::launch::async, [&, s] {
      for (int t = first; t < last; ++t) {
        const StreamedTurn turn = stream_turn(port, requests[s], tag + std::to_string(s));
        run.turns[s].push_back(turn);
        if (!turn.complete) return;
        requests[s] = next_session_request(requests[s], turn.message, t + 1);
      }
    }));
  for (auto& f : sessions) f.get();
}

std::vector<json> first_requests(const std::string& tag) {
  std::vector<json> out;
  for (int s = 0; s < kSessions; ++s) out.push_back(session_request(tag + std::to_string(s), kMaxTokens));
  return out;
}

struct Row {
  std::string name;
  SessionsRun run;
};

void print_table(const std::vector<Row>& rows) {
  std::printf("\n| deployment | sessions | turns 2-5 from cache (mean / min) | TTFT turns 2-5 p50 / p99 (s) | lost |\n");
  std::printf("|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    const auto shares = r.run.later(share_of);
    const auto ttft = r.run.later(ttft_of);
    std::printf("| %s | %d | %.1f%% / %.1f%% | %.3f / %.3f | %d |\n", r.name.c_str(), kSessions, 100 * mean(shares),
                100 * (shares.empty() ? 0 : *std::min_element(shares.begin(), shares.end())), percentile(ttft, 50),
                percentile(ttft, 99), r.run.lost());
  }
}

TEST(DeployHaproxy, SessionAffinityKeepsEachSessionOnItsCache) {
  REQUIRE_HAPROXY();
  const auto model = tiny_toolcaller_dir();
  std::vector<Row> rows;
  for (const auto& [name, replicas, balance] : {std::tuple{"1 replica", 1, ""}, std::tuple{"3 replicas, affinity", 3, ""},
                                                 std::tuple{"3 replicas, round robin", 3, "roundrobin"}}) {
    Deployment deployment(model, replicas, balance);
    auto requests = first_requests("s");
    Row row{name, {}};
    run_turns(deployment.port(), requests, row.run, 0, kTurns, "s");
    rows.push_back(std::move(row));
  }
  print_table(rows);

  for (const Row& r : rows) {
    EXPECT_EQ(r.run.lost(), 0) << r.name;
    for (const auto& session : r.run.turns)
      for (const StreamedTurn& t : session) EXPECT_TRUE(t.complete) << r.name << ": " << t.error;
  }
  // With affinity every later turn reads at least 90% of its prompt from cache, on one replica
  // or three; round robin sends turns where their sessions' prefixes are not.
  for (const Row* r : {&rows[0], &rows[1]})
    for (double share : r->run.later(share_of)) EXPECT_GE(share, 0.9) << r->name;
  EXPECT_LT(mean(rows[2].run.later(share_of)), mean(rows[1].run.later(share_of)) - 0.1);
  // Affinity spread the sessions over the replicas.
  std::map<std::string, int> per_replica;
  for (const auto& session : rows[1].run.turns) ++per_replica[session[0].replica];
  EXPECT_GE(per_replica.size(), 2u);
}

// Where each client keeps its session key (docs/deploy.md): every request of one key lands on one
// replica, and the keys spread over the replicas.
TEST(DeployHaproxy, EveryClientsSessionKeyIsHashed) {
  REQUIRE_HAPROXY();
  Deployment deployment(tiny_toolcaller_dir(), 3);
  httplib::Client client("127.0.0.1", deployment.port());
  const json chat = {{"model", "keel"}, {"max_tokens", 1}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  const json responses = {{"model", "keel"}, {"max_output_tokens", 16}, {"input", "hi"}};
  struct Form {
    const char* name;
    std::function<httplib::Result(const std::string& key)> send;
  };
  const std::vector<Form> forms = {
      {"Claude Code's x-claude-code-session-id",
       [&](const std::string& key) {
         return client.Post("/v1/messages", {{"x-claude-code-session-id", key}}, session_request(key, 1).dump(), "application/json");
       }},
      {"Codex's session-id header",
       [&](const std::string& key) { return client.Post("/v1/responses", {{"session-id", key}}, responses.dump(), "application/json"); }},
      {"OpenAI's prompt_cache_key",
       [&](const std::string& key) {
         json body = chat;
         body["prompt_cache_key"] = key;
         return client.Post("/v1/chat/completions", body.dump(), "application/json");
       }},
      {"Anthropic's metadata.user_id",
       [&](const std::string& key) {
         json body = session_request(key, 1);
         body["metadata"] = {{"user_id", key}};
         return client.Post("/v1/messages", body.dump(), "application/json");
       }},
      {"OpenAI's user",
       [&](const std::string& key) {
         json body = chat;
         body["user"] = key;
         return client.Post("/v1/chat/completions", body.dump(), "application/json");
       }}};
  for (const Form& form : forms) {
    std::set<std::string> used;
    for (int k = 0; k < 6; ++k) {
      std::set<std::string> replicas;
      for (int i = 0; i < 3; ++i) {
        auto res = form.send(std::string(form.name).substr(0, 6) + "-key-" + std::to_string(k));
        ASSERT_TRUE(res) << form.name;
        ASSERT_EQ(res->status, 200) << form.name << ": " << res->body;
        replicas.insert(res->get_header_value("X-Keel-Replica"));
      }
      EXPECT_EQ(replicas.size(), 1u) << form.name << ": one key went to " << replicas.size() << " replicas";
      used.insert(replicas.begin(), replicas.end());
    }
    EXPECT_GE(used.size(), 2u) << form.name << ": six keys all went to one replica";
  }
}

// A session key that HAProxy sends to `replica` (found by asking: the hash is HAProxy's).
std::string key_for(int port, const std::string& replica, const std::string& tag) {
  for (int i = 0; i < 200; ++i) {
    const std::string key = tag + std::to_string(i);
    json probe = session_request(key, 1);
    if (stream_turn(port, probe, key).replica == replica) return key;
  }
  throw std::runtime_error("no key maps to " + replica);
}

// A stream of `max_tokens` on `key`, started on another thread; `started` once its turn runs.
struct LongStream {
  LongStream(int port, const std::string& key, int max_tokens) {
    answer = std::async(std::launch::async, [this, port, key, max_tokens] {
      return stream_turn(port, session_request(key, max_tokens), key, [this] { started = true; });
    });
    for (int i = 0; i < 3000 && !started; ++i) std::this_thread::sleep_for(10ms);
  }
  std::atomic<bool> started{false};
  std::future<StreamedTurn> answer;
};

TEST(DeployHaproxy, AKilledReplicaLosesNoRequestThatHadNotStartedStreaming) {
  REQUIRE_HAPROXY();
  TempDir dir;
  // One turn at a time per replica, so that the victim has requests waiting when it dies.
  Deployment deployment(random_talker(dir), 3, "", {"--parallel", "1"});
  auto requests = first_requests("k");
  SessionsRun run;
  run_turns(deployment.port(), requests, run, 0, 1, "k");
  ASSERT_EQ(run.lost(), 0);
  // The victim: the replica of session 0.
  const std::string victim = run.turns[0][0].replica;
  const int victim_index = victim.back() - '0';

  // A stream in flight there when it dies, and every session's next turn sent at once: those of
  // the victim's sessions wait behind the stream, not yet answered.
  LongStream stream(deployment.port(), key_for(deployment.port(), victim, "long-"), 4000);
  ASSERT_TRUE(stream.started);
  std::vector<std::future<StreamedTurn>> second;
  for (int s = 0; s < kSessions; ++s)
    second.push_back(std::async(std::launch::async, [&, s] { return stream_turn(deployment.port(), requests[s], "k" + std::to_string(s)); }));
  std::this_thread::sleep_for(500ms);
  ASSERT_EQ(kill(deployment.replica_pid(victim_index), SIGKILL), 0);
  const auto killed_at = std::chrono::steady_clock::now();

  // The stream it was writing ends with an error at once, not a hang.
  ASSERT_EQ(stream.answer.wait_until(killed_at + 20s), std::future_status::ready) << "a cut stream hangs";
  const double cut_after = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  const StreamedTurn cut = stream.answer.get();
  EXPECT_EQ(cut.status, 200);
  EXPECT_FALSE(cut.complete);
  EXPECT_FALSE(cut.error.empty());

  // Every session's turn is answered: the waiting ones by another replica, as if nothing happened.
  // (One whose stream the kill had cut would be sent again by its client, as Claude Code does;
  // here none had started.)
  int moved = 0;
  std::vector<std::string> replica_of(kSessions);
  for (int s = 0; s < kSessions; ++s) {
    const StreamedTurn turn = second[s].get();
    ASSERT_TRUE(turn.complete) << "session " << s << ": " << turn.error;
    EXPECT_NE(turn.replica, victim);
    moved += run.turns[s][0].replica == victim ? 1 : 0;
    replica_of[s] = turn.replica;
    requests[s] = next_session_request(requests[s], turn.message, 2);
  }
  // The rest of the sessions: the moved ones paid one cold prefill and are warm again.
  SessionsRun rest;
  run_turns(deployment.port(), requests, rest, 2, kTurns, "k");
  EXPECT_EQ(rest.lost(), 0);
  for (int s = 0; s < kSessions; ++s)
    for (const StreamedTurn& t : rest.turns[s]) {
      EXPECT_EQ(t.replica, replica_of[s]) << "session " << s << " moved again";
      EXPECT_GE(t.cached_share(), 0.9) << "session " << s;
    }
  std::printf("\nkilled %s mid-stream with %d sessions' turns in flight: the stream ended with an error after %.2f s, "
              "%d sessions moved, 0 requests lost\n",
              victim.c_str(), kSessions, cut_after, moved);
  EXPECT_GT(moved, 0);
}

TEST(DeployHaproxy, ADrainingReplicaLeavesThePoolBeforeItsStreamsEnd) {
  REQUIRE_HAPROXY();
  TempDir dir;
  Deployment deployment(random_talker(dir), 3);
  const std::string key = key_for(deployment.port(), "keel2", "drain-");
  LongStream stream(deployment.port(), key, 6000);
  ASSERT_TRUE(stream.started);
  const pid_t pid = deployment.replica_pid(2);
  ASSERT_EQ(kill(pid, SIGTERM), 0);

  // The same session's next requests go elsewhere at once, while keel2 is still streaming.
  for (int i = 0; i < 3; ++i) {
    const StreamedTurn turn = stream_turn(deployment.port(), session_request(key, kMaxTokens), key);
    ASSERT_TRUE(turn.complete) << turn.error;
    EXPECT_NE(turn.replica, "keel2");
  }
  EXPECT_EQ(stream.answer.wait_for(0s), std::future_status::timeout) << "the drained stream ended before the checks";
  // HAProxy's health check took it out of the pool while its stream ran.
  for (int i = 0; i < 100 && deployment.log("haproxy").find("keel/keel2 is DOWN") == std::string::npos; ++i)
    std::this_thread::sleep_for(100ms);
  EXPECT_NE(deployment.log("haproxy").find("keel/keel2 is DOWN"), std::string::npos) << deployment.log("haproxy");
  EXPECT_EQ(stream.answer.wait_for(0s), std::future_status::timeout) << "the stream ended before keel2 left the pool";

  // Nothing was cut: the stream ends as it would have, and keel2 then exits.
  const StreamedTurn drained = stream.answer.get();
  EXPECT_TRUE(drained.complete) << drained.error;
  EXPECT_EQ(drained.replica, "keel2");
  bool exited = false;
  for (int i = 0; i < 200 && !exited; ++i) {
    exited = kill(pid, 0) != 0;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(exited);
  EXPECT_NE(deployment.log("keel2").find("keel serve: stopped"), std::string::npos) << deployment.log("keel2");
}

}  // namespace
}  // namespace keel::test
