// keel eval fidelity: identical arms must agree exactly, a broken cache must be detected.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>

#include "keel/eval/divergence.h"
#include "keel/eval/fidelity.h"
#include "keel/eval/policy_arms.h"
#include "keel/util/error.h"
#include "test_support.h"

namespace keel::eval {
namespace {

using json = nlohmann::ordered_json;

ServedModel& model(const std::string& name) {
  static std::map<std::string, std::unique_ptr<ServedModel>> models;
  auto& m = models[name];
  if (!m) {
    const auto dir = name == "tiny-toolcaller" ? test::source_dir() / "models" / name : test::shared_dir() / "models" / name;
    m = std::make_unique<ServedModel>(arch::resolve_model(dir), ServedModelOptions{.threads = 2});
  }
  return *m;
}

// A short tool-calling conversation (about 200 tokens: quick under ASan) with every role group.
std::vector<Transcript> short_transcripts() {
  const json tools = json::parse(R"([{"type":"function","function":{"name":"Bash",
    "description":"Execute a bash command and return output.",
    "parameters":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}}])");
  const json messages = json::parse(R"([
    {"role":"system","content":"You are a helpful coding assistant. Use the tools."},
    {"role":"user","content":"What files are in /tmp?"},
    {"role":"assistant","content":"","tool_calls":[{"id":"call_0","type":"function",
      "function":{"name":"Bash","arguments":{"command":"ls /tmp"}}}]},
    {"role":"tool","tool_call_id":"call_0","content":"notes.txt\nbuild\n"},
    {"role":"user","content":"Count the lines in /tmp/notes.txt"},
    {"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function",
      "function":{"name":"Bash","arguments":{"command":"wc -l /tmp/notes.txt"}}}]}])");
  return {Transcript{"short", messages, tools}};
}

TEST(EvalDivergence, IdenticalRowsGiveZeroAndDifferentRowsPositiveKl) {
  const std::vector<float> a = {1.0f, 2.0f, 3.0f, -1.0f};
  const PositionDivergence same = compare_logits(a, a);
  EXPECT_EQ(same.kl, 0.0);
  EXPECT_TRUE(same.same_top1);
  const std::vector<float> b = {1.0f, 3.5f, 3.0f, -1.0f};
  const PositionDivergence diff = compare_logits(a, b);
  EXPECT_FALSE(diff.same_top1);
  // KL(p||q) by hand for these two softmaxes.
  auto softmax = [](const std::vector<float>& x) {
    std::vector<double> p;
    double s = 0;
    for (float v : x) s += std::exp(static_cast<double>(v));
    for (float v : x) p.push_back(std::exp(static_cast<double>(v)) / s);
    return p;
  };
  const auto p = softmax(a), q = softmax(b);
  double expected = 0;
  for (size_t i = 0; i < p.size(); ++i) expected += p[i] * std::log(p[i] / q[i]);
  EXPECT_NEAR(diff.kl, expected, 1e-12);
  EXPECT_THROW(compare_logits(a, std::vector<float>{1.0f}), Error);
}

TEST(EvalDivergence, StatsSummariseMeanP99MaxAndFlips) {
  DivergenceStats s;
  for (int i = 1; i <= 200; ++i) s.add({static_cast<double>(i), i % 50 != 0});
  EXPECT_EQ(s.positions(), 200);
  EXPECT_DOUBLE_EQ(s.mean_kl(), 100.5);
  EXPECT_DOUBLE_EQ(s.p99_kl(), 198.0);
  EXPECT_DOUBLE_EQ(s.max_kl(), 200.0);
  EXPECT_EQ(s.flips(), 4);
  EXPECT_DOUBLE_EQ(s.flips_per_10k(), 200.0);
  EXPECT_DOUBLE_EQ(s.top1_agreement(), 0.98);
}

TEST(EvalPolicyArms, ParsesPresetsShorthandAndCommaSeparatedSpecs) {
  const auto arms = parse_policy_list("full,int4,default=int2,recent=0;int8");
  ASSERT_EQ(arms.size(), 4u);
  EXPECT_EQ(arms[0].policy, kv::KvPolicy());
  EXPECT_EQ(arms[2].label, "default=int2 recent=0");
  EXPECT_EQ(arms[2].policy, kv::KvPolicy::parse("default=int2"));
  EXPECT_EQ(parse_policy_list("int2")[0].policy, kv::KvPolicy::parse("default=int2"));
  EXPECT_THROW(parse_policy_list("full,full"), Error);
  EXPECT_THROW(parse_policy_list("int3"), Error);
  EXPECT_THROW(parse_policy_list(" , "), Error);
}

TEST(EvalPolicyArms, AnArmMayBeNamed) {
  const auto arms = parse_policy_list("int8;k8: system=bf16 layers<4=k:int8 default=int4,recent=64;p2: int2");
  ASSERT_EQ(arms.size(), 3u);
  EXPECT_EQ(arms[1].label, "k8");
  EXPECT_EQ(arms[1].policy, kv::KvPolicy::parse("system=bf16 layers<4=k:int8 default=int4 recent=64"));
  EXPECT_EQ(arms[2].label, "p2");
  EXPECT_EQ(arms[2].policy, kv::KvPolicy::parse("default=int2"));
  // A layer term's colon is no name, and a name is given once.
  EXPECT_EQ(parse_policy_list("layers<2=k:bf16 default=int4")[0].label, "layers<2=k:bf16 default=int4");
  EXPECT_THROW(parse_policy_list("a: int8;a: int4"), Error);
  EXPECT_THROW(parse_policy_list("a: "), Error);
}

TEST(EvalFidelity, IdenticalArmsGiveZeroFlipsAndZeroKl) {
  ServedModel& m = model("tiny-toolcaller");
  const FidelityResult r = run_fidelity(m, m, short_transcripts(), {full_arm()}, FidelityOptions{});
  ASSERT_EQ(r.arms.size(), 1u);
  const DivergenceStats& s = r.arms[0].overall;
  EXPECT_GT(s.positions(), 100);
  EXPECT_EQ(s.flips(), 0);
  EXPECT_EQ(s.max_kl(), 0.0);
  EXPECT_EQ(s.top1_agreement(), 1.0);
  // Every role group of the conversation got positions (tool calls and results included).
  for (RoleGroup g : {RoleGroup::tools_system, RoleGroup::user, RoleGroup::tool_call, RoleGroup::tool_result})
    EXPECT_GT(r.arms[0].by_group[static_cast<size_t>(g)].positions(), 0) << role_group_name(g);
}

TEST(EvalFidelity, BrokenArmShowsMoreFlipsAndLargerKlThanFullAndInt8) {
  ServedModel& m = model("tiny-toolcaller");
  FidelityOptions o;
  o.chunk = 64;  // lockstep over several chunks
  const auto arms = parse_policy_list("full,int8,default=int2,recent=0");
  const FidelityResult r = run_fidelity(m, m, short_transcripts(), arms, o);
  ASSERT_EQ(r.arms.size(), 3u);
  const DivergenceStats &full = r.arms[0].overall, &int8 = r.arms[1].overall, &broken = r.arms[2].overall;
  EXPECT_EQ(full.flips(), 0);
  EXPECT_GT(broken.flips(), full.flips());
  EXPECT_GT(broken.mean_kl(), 0.0);
  EXPECT_GT(int8.mean_kl(), 0.0);  // int8 is not bit-exact ...
  EXPECT_LT(int8.mean_kl(), broken.mean_kl());  // ... but far closer than 2-bit keys and values
  EXPECT_GE(broken.flips(), int8.flips());
  EXPECT_LT(r.arms[2].kv_bytes_per_token, r.arms[1].kv_bytes_per_token);
  EXPECT_LT(r.arms[1].kv_bytes_per_token, r.arms[0].kv_bytes_per_token);
}

TEST(EvalFidelity, DistanceBucketsCountBackFromTheEnd) {
  EXPECT_EQ(distance_bucket(0), 0u);
  EXPECT_EQ(distance_bucket(255), 0u);
  EXPECT_EQ(distance_bucket(256), 1u);
  EXPECT_EQ(distance_bucket(1023), 1u);
  EXPECT_EQ(distance_bucket(4096), 3u);
  EXPECT_EQ(distance_bucket(16383), 3u);
  EXPECT_EQ(distance_bucket(16384), 4u);
  EXPECT_EQ(distance_bucket(1 << 30), kDistanceBucketCount - 1);
  EXPECT_EQ(distance_bucket_name(0), "0-255");
  EXPECT_EQ(distance_bucket_name(1), "256-1023");
  EXPECT_EQ(distance_bucket_name(kDistanceBucketCount - 1), "16384+");

  // A conversation with a long tool result (about 1,300 tokens): positions land in the first two
  // buckets, every position in exactly one, tool calls by distance add up to the tool_call role.
  std::vector<Transcript> t = short_transcripts();
  std::string listing;
  for (int i = 0; i < 60; ++i) listing += "-rw-r--r-- 1 dev dev " + std::to_string(1000 + 37 * i) + " notes_" + std::to_string(i) + ".txt\n";
  t[0].messages[3]["content"] = listing;
  ServedModel& m = model("tiny-toolcaller");
  FidelityOptions o;
  o.chunk = 256;
  const FidelityResult r = run_fidelity(m, m, t, parse_policy_list("full,default=int2"), o);
  ASSERT_EQ(r.prompt_lengths.size(), 1u);
  const int64_t n = r.prompt_lengths[0];
  ASSERT_GT(n, 1100);
  ASSERT_LT(n, 4000);
  for (const ArmFidelity& a : r.arms) {
    int64_t positions = 0, flips = 0, calls = 0;
    for (size_t b = 0; b < kDistanceBucketCount; ++b) {
      positions += a.by_distance[b].positions();
      flips += a.by_distance[b].flips();
      calls += a.tool_call_by_distance[b].positions();
    }
    EXPECT_EQ(positions, a.overall.positions());
    EXPECT_EQ(flips, a.overall.flips());
    EXPECT_EQ(calls, a.by_group[static_cast<size_t>(RoleGroup::tool_call)].positions());
    EXPECT_EQ(a.by_distance[0].positions(), 256);  // the predicted tokens 0..255 before the last
    EXPECT_EQ(a.by_distance[1].positions(), std::min<int64_t>(768, n - 1 - 256));
    EXPECT_GT(a.tool_call_by_distance[0].positions(), 0);  // the closing call is near the end
    EXPECT_GT(calls, a.tool_call_by_distance[0].positions());  // the first one, before the listing
  }
  EXPECT_GT(r.arms[1].overall.flips(), 0);
}

TEST(EvalFidelity, ChunkSizeDoesNotChangeTheResult) {
  ServedModel& m = model("tiny-toolcaller");
  const auto arms = parse_policy_list("int4");
  FidelityOptions a, b;
  a.chunk = 256;
  b.chunk = 17;
  const auto ra = run_fidelity(m, m, short_transcripts(), arms, a);
  const auto rb = run_fidelity(m, m, short_transcripts(), arms, b);
  EXPECT_EQ(ra.arms[0].overall.mean_kl(), rb.arms[0].overall.mean_kl());
  EXPECT_EQ(ra.arms[0].overall.flips(), rb.arms[0].overall.flips());
}

TEST(EvalFidelity, WeightsBaselineSeparatesWeightFlipsFromKvFlips) {
  ServedModel& bf16 = model("tiny-toolcaller");
  ServedModel& mlx4 = model("tiny-toolcaller-mlx4");
  const FidelityResult r = run_fidelity(bf16, mlx4, short_transcripts(), {full_arm()}, FidelityOptions{});
  // Same KV policy on both sides: what differs is the 4-bit weights alone.
  EXPECT_GT(r.arms[0].overall.mean_kl(), 0.0);
}

TEST(EvalTranscripts, ShippedTranscriptsParseAndRejectBadLines) {
  const auto shipped = load_transcripts(test::source_dir() / "eval/transcripts/tiny-toolcaller.jsonl");
  EXPECT_GE(shipped.size(), 10u);
  for (const Transcript& t : shipped) EXPECT_EQ(t.messages.back()["role"], "assistant") << t.name;
  const auto round_trip = parse_transcripts(transcript_line(shipped[0]) + "\n\n", "mem");
  EXPECT_EQ(round_trip[0].messages, shipped[0].messages);
  EXPECT_THROW(parse_transcripts("{\"messages\": []}\n", "mem"), Error);
  EXPECT_THROW(parse_transcripts("not json\n", "mem"), Error);
  EXPECT_THROW(parse_transcripts("\n", "mem"), Error);
}

}  // namespace
}  // namespace keel::eval
