// The recurrent state of Qwen3-Next's linear-attention layers in the KV pool: which snapshots a
// sequence keeps (its latest, its branch point, one per interval), where reuse and trims resume,
// and that every resumed run is bit-identical to a fresh prefill under full, int8 and protect. The
// generic reuse invariants (kv_prefix_cache_test, kv_pool_test, engine_batch_invariance_test) run
// this model too; these cases pin down what is particular to the state.
#include <gtest/gtest.h>

#include <random>

#include "keel/arch/synth.h"
#include "keel/kv/kv_block_layout.h"
#include "keel/kv/kv_footprint.h"
#include "kv_reuse_support.h"

namespace keel::kv::reuse {
namespace {

const char* const kModel = "tiny-qwen3next-random";

std::vector<KvPolicy> state_policies() {
  // protect at its own recent window: a narrow one (kv_prefix_cache_test) limits reuse by the rows it drops.
  return {KvPolicy::parse("full"), KvPolicy::parse("int8"), KvPolicy::parse("protect")};
}

// Random turns that open with a user token: no preamble, whose end would keep a snapshot of its own
// (AgentsSharingAPreambleResumeAtItsEnd covers that).
Conversation conversation(std::mt19937& rng, int64_t n, int64_t vocab) {
  Conversation c = random_conversation(rng, n, vocab);
  c.roles.front() = Role::user;
  return c;
}

// Greedy decoding of `n` tokens as the assistant, one forward pass each.
void decode(Transformer& model, KvSequence& seq, Conversation& c, std::vector<float> logits, int n) {
  for (int i = 0; i < n; ++i) {
    c.ids.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    c.roles.push_back(Role::assistant);
    logits = run_rest(model, seq, c, 1);
  }
}

TEST(KvLinearState, OnlyTheFullAttentionLayersStoreRows) {
  Model m(kModel);
  KvPool pool(m.weights.spec, kBudget, KvPolicy::parse("int8"), true);
  ASSERT_EQ(pool.layout().group_count(), 1);
  EXPECT_EQ(pool.layout().group(0).layers, std::vector<int64_t>{3});
  EXPECT_EQ(pool.layout().linear().layers, (std::vector<int64_t>{0, 1, 2, 4}));
  // Per linear layer: conv (4 - 1) x (16 + 16 + 64) and 4 value heads x 16 x 16, as f32.
  EXPECT_EQ(pool.layout().linear().snapshot_bytes(), 4 * (3 * 128 + 4 * 16 * 16) * 4);
}

// The next turn of a conversation resumes after the last complete block the previous one reached,
// generated tokens included: only the rest is prefilled.
TEST(KvLinearState, TheNextTurnResumesAtTheLatestSnapshot) {
  Model m(kModel);
  for (const KvPolicy& policy : state_policies()) {
    SCOPED_TRACE(policy.describe());
    std::mt19937 rng(11);
    KvPool pool(m.weights.spec, kBudget, policy, true);
    Conversation turn = conversation(rng, 150, m.weights.spec.vocab_size);
    {
      auto seq = pool.open(turn.ids, turn.roles);
      decode(m.model, *seq, turn, run_rest(m.model, *seq, turn, 32), 30);
      seq->publish();
      // While decoding, each new block's snapshot replaced the one before: the latest is left.
      EXPECT_EQ(pool.stats().state_snapshots, 1);
    }
    add_random_turns(turn, rng, 25, m.weights.spec.vocab_size);
    auto seq = pool.open(turn.ids, turn.roles);
    EXPECT_EQ(seq->size(), 176);  // 180 tokens ran: the block boundary at 176
    EXPECT_TRUE(same_bits(run_rest(m.model, *seq, turn, 32), fresh_logits(m.model, policy, turn)));
  }
}

// A prompt's end is where the next turn branches when it re-renders the answer differently: the
// snapshot there stays however long the answer runs.
TEST(KvLinearState, ABranchAtThePromptEndResumesThere) {
  Model m(kModel);
  for (const KvPolicy& policy : state_policies()) {
    for (bool keep : {true, false}) {
      SCOPED_TRACE(policy.describe() + (keep ? " kept" : " not kept"));
      std::mt19937 rng(12);
      KvPool pool(m.weights.spec, kBudget, policy, true);
      const Conversation prompt = conversation(rng, 150, m.weights.spec.vocab_size);
      {
        Conversation turn = prompt;
        auto seq = pool.open(turn.ids, turn.roles);
        const std::vector<float> logits = run_rest(m.model, *seq, turn, 64);
        if (keep) seq->keep_window_for_branch();
        decode(m.model, *seq, turn, logits, 40);
        seq->publish();
      }
      Conversation other = prompt;  // another answer, then a new message
      add_random_turns(other, rng, 60, m.weights.spec.vocab_size);
      auto seq = pool.open(other.ids, other.roles);
      EXPECT_EQ(seq->size(), keep ? 144 : 0);
      EXPECT_TRUE(same_bits(run_rest(m.model, *seq, other, 32), fresh_logits(m.model, policy, other)));
    }
  }
}

// Interval snapshots let a request that shares only the start of a cached prefix resume inside it.
TEST(KvLinearState, IntervalSnapshotsLetADivergenceResumeBeforeIt) {
  Model m(kModel);
  for (const KvPolicy& policy : state_policies()) {
    for (int64_t interval : {2, 128}) {
      SCOPED_TRACE(policy.describe() + " every " + std::to_string(interval) + " blocks");
      std::mt19937 rng(13);
      KvPool pool(m.weights.spec, kBudget, policy, true, 0, {}, interval);
      const Conversation a = conversation(rng, 150, m.weights.spec.vocab_size);
      {
        auto seq = pool.open(a.ids, a.roles);
        run_rest(m.model, *seq, a, 150);
        seq->publish();
      }
      EXPECT_EQ(pool.stats().state_snapshots, interval == 2 ? 5 : 1);  // 32, 64, 96, 128 and the latest, 144
      Conversation b = a.prefix(100);
      add_random_turns(b, rng, 30, m.weights.spec.vocab_size);
      auto seq = pool.open(b.ids, b.roles);
      EXPECT_EQ(seq->size(), interval == 2 ? 96 : 0);
      EXPECT_TRUE(same_bits(run_rest(m.model, *seq, b, 32), fresh_logits(m.model, policy, b)));
    }
  }
}

// Agents that share a system prompt and tools part ways where the preamble ends: its last block
// boundary keeps a snapshot, so the next agent resumes there, not at the interval before it.
TEST(KvLinearState, AgentsSharingAPreambleResumeAtItsEnd) {
  Model m(kModel);
  for (const KvPolicy& policy : state_policies()) {
    SCOPED_TRACE(policy.describe());
    std::mt19937 rng(18);
    std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(m.weights.spec.vocab_size - 1));
    Conversation preamble;
    for (int i = 0; i < 110; ++i) {
      preamble.ids.push_back(token(rng));
      preamble.roles.push_back(i < 3 ? Role::scaffolding : i < 60 ? Role::system : i < 105 ? Role::tools : Role::scaffolding);
    }
    KvPool pool(m.weights.spec, kBudget, policy, true);
    for (int agent = 0; agent < 2; ++agent) {
      Conversation c = preamble;
      for (int i = 0; i < 50; ++i) {
        c.ids.push_back(token(rng));
        c.roles.push_back(Role::user);
      }
      auto seq = pool.open(c.ids, c.roles);
      EXPECT_EQ(seq->size(), agent == 0 ? 0 : 96);  // 110 tokens of preamble: the boundary at 96
      EXPECT_TRUE(same_bits(run_rest(m.model, *seq, c, 64), fresh_logits(m.model, policy, c)));
      seq->publish();
    }
  }
}

// A tool-call retry rewinds a few tokens: inside the live tile that costs nothing; further back the
// sequence resumes at its latest snapshot before the cut and runs the rest again.
TEST(KvLinearState, RewindAndTrimEqualFresh) {
  Model m(kModel);
  // Snapshots at 64 and 128 (every 4 blocks) and 144 (the prompt's last pass); 155 tokens ran, so
  // the live tile is 144..159.
  const struct {
    int64_t cut, kept;
  } steps[] = {{152, 152}, {146, 146}, {144, 144}, {140, 128}, {100, 64}, {20, 0}};
  for (const KvPolicy& policy : state_policies()) {
    for (const auto& step : steps) {
      SCOPED_TRACE(policy.describe() + ", cut at " + std::to_string(step.cut));
      std::mt19937 rng(14);
      KvPool pool(m.weights.spec, kBudget, policy, true, 0, {}, 4);
      Conversation c = conversation(rng, 150, m.weights.spec.vocab_size);
      auto seq = pool.open(c.ids, c.roles);
      decode(m.model, *seq, c, run_rest(m.model, *seq, c, 64), 5);
      EXPECT_EQ(seq->trim(step.cut), step.kept);
      c = c.prefix(step.cut);
      add_random_turns(c, rng, 30, m.weights.spec.vocab_size);
      EXPECT_TRUE(same_bits(run_rest(m.model, *seq, c, 7), fresh_logits(m.model, policy, c)));
    }
  }
}

// Exact cuts only: set_size() refuses a point it cannot resume at without running tokens again.
TEST(KvLinearState, SetSizeCutsOnlyWhereTheStateIs) {
  Model m(kModel);
  std::mt19937 rng(15);
  KvPool pool(m.weights.spec, kBudget, KvPolicy::parse("full"), true);
  const Conversation c = conversation(rng, 100, m.weights.spec.vocab_size);
  auto seq = pool.open(c.ids, c.roles);
  run_rest(m.model, *seq, c, 100);
  EXPECT_THROW(seq->set_size(50), Error);  // no snapshot at or after 48 below 96
  EXPECT_EQ(seq->size(), 100);
  seq->set_size(97);  // inside the live tile (96..111)
  EXPECT_EQ(seq->size(), 97);
  seq->set_size(96);  // the latest snapshot
  EXPECT_EQ(seq->size(), 96);
}

// The state's bytes are in the pool's budget: each live sequence's state and every snapshot, and
// kv_context_bytes (what the planner counts) covers what one sequence holds.
TEST(KvLinearState, StateBytesAreCountedAndGiveBack) {
  Model m(kModel);
  std::mt19937 rng(16);
  KvPool pool(m.weights.spec, kBudget, KvPolicy::parse("full"), true);
  const KvLinearLayers& linear = pool.layout().linear();
  EXPECT_EQ(pool.stats().state_bytes, 0);
  {
    const Conversation c = conversation(rng, 150, m.weights.spec.vocab_size);
    auto seq = pool.open(c.ids, c.roles);
    EXPECT_EQ(pool.stats().state_bytes, linear.live_bytes());
    run_rest(m.model, *seq, c, 150);
    seq->keep_window_for_branch();
    const KvPoolStats s = pool.stats();
    EXPECT_EQ(s.state_snapshots, 1);
    EXPECT_EQ(s.state_bytes, linear.live_bytes() + linear.snapshot_bytes());
    EXPECT_LE(s.used_bytes, kv_context_bytes(m.weights.spec, KvPolicy::parse("full"), 150));
    seq->publish();
  }
  // The sequence is gone, its published block keeps its snapshot until it is evicted.
  EXPECT_EQ(pool.stats().state_bytes, linear.snapshot_bytes());
  pool.make_room(kBudget);  // evicts every cached block
  EXPECT_EQ(pool.stats().state_bytes, 0);
  EXPECT_EQ(pool.stats().used_bytes, 0);
}

}  // namespace
}  // namespace keel::kv::reuse

namespace keel::kv::reuse {
namespace {

// A model of linear layers only (the first two of the tiny config, `keel synth --layers 2`): no
// layer stores rows, yet blocks carry the ids and the snapshots, and reuse stays exact.
TEST(KvLinearState, AModelWithoutAttentionLayersReusesExactly) {
  test::TempDir dir;
  SynthOptions options;
  options.layers = 2;
  synthesize_model(test::shared_dir() / "models/tiny-qwen3next-random/config.json", dir.path(), options);
  const ModelWeights weights = arch::load_model(dir.path());
  ASSERT_EQ(KvBlockLayout(weights.spec).group_count(), 0);
  ThreadPool threads(2);
  Transformer model(weights, threads);
  std::mt19937 rng(17);
  KvPool pool(weights.spec, kBudget, KvPolicy::parse("full"), true);
  Conversation c = conversation(rng, 100, weights.spec.vocab_size);
  {
    auto seq = pool.open(c.ids, c.roles);
    run_rest(model, *seq, c, 30);
    seq->publish();
  }
  add_random_turns(c, rng, 20, weights.spec.vocab_size);
  auto seq = pool.open(c.ids, c.roles);
  EXPECT_EQ(seq->size(), 96);
  EXPECT_TRUE(same_bits(run_rest(model, *seq, c, 30), fresh_logits(model, KvPolicy::parse("full"), c)));
}

}  // namespace
}  // namespace keel::kv::reuse
