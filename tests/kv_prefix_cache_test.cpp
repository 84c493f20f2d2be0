// The prefix cache's contract (DESIGN.md invariant 4): under every policy, logits after reusing a
// cached prefix, after trimming anywhere and re-extending, or after a later turn that reuses
// generated tokens, are bit-identical to a fresh prefill of the same tokens; and no block is ever
// quantized twice. Random conversations (random ids, random role runs) on two real models, with a
// recent window of 32 so blocks really leave it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "keel/arch/model_loader.h"
#include "keel/arch/transformer.h"
#include "keel/kv/kv_pool.h"
#include "keel/model/weights.h"
#include "keel/util/error.h"
#include "kv_reuse_support.h"
#include "test_support.h"

namespace keel::kv {
namespace {

using chat::Role;
using reuse::add_random_turns, reuse::Conversation, reuse::fresh_logits, reuse::kBudget, reuse::policies, reuse::run_rest,
    reuse::same_bits;

struct Model {
  explicit Model(const char* name) : weights(arch::load_model(test::shared_dir() / "models" / name)), model(weights, pool) {}
  ModelWeights weights;
  ThreadPool pool{2};
  Transformer model;
};

// Gemma 3 has sliding-window layers (window 8) that keep only the blocks their window reaches;
// Qwen3-MoE routes each token to 2 of 8 experts; gpt-oss has both, with sinks, YaRN and MXFP4.
// Qwen3-Next's linear-attention layers resume from state snapshots at block boundaries.
const char* const kModels[] = {"tiny-toolcaller", "tiny-qwen3-random", "tiny-gemma3-random", "tiny-qwen3moe-random",
                               "tiny-gptoss-random", "tiny-gemma4-random", "tiny-qwen3next-random"};

TEST(KvPrefixCache, ReusedPrefixIsBitIdenticalToFreshPrefill) {
  for (const char* name : kModels) {
    Model m(name);
    std::mt19937 rng(5);
    for (const KvPolicy& policy : policies()) {
      SCOPED_TRACE(std::string(name) + " / " + policy.describe());
      KvPool pool(m.weights.spec, kBudget, policy, true);
      Conversation a;
      add_random_turns(a, rng, 150, m.weights.spec.vocab_size);
      {
        auto seq = pool.open(a.ids, a.roles);
        run_rest(m.model, *seq, a, 32);
        seq->publish();
      }
      // The next turn: everything cached is reused (whole blocks), the rest is prefilled.
      Conversation next = a;
      add_random_turns(next, rng, 40, m.weights.spec.vocab_size);
      {
        auto seq = pool.open(next.ids, next.roles);
        EXPECT_EQ(seq->size(), 144);
        EXPECT_TRUE(same_bits(run_rest(m.model, *seq, next, 7), fresh_logits(m.model, policy, next)));
        seq->publish();
      }
      // Branches off the cached sequences at random points.
      for (int i = 0; i < 4; ++i) {
        const int64_t cut = std::uniform_int_distribution<int64_t>(1, next.size() - 1)(rng);
        Conversation branch = next.prefix(cut);
        add_random_turns(branch, rng, 30, m.weights.spec.vocab_size);
        auto seq = pool.open(branch.ids, branch.roles);
        EXPECT_LE(seq->size(), cut);
        EXPECT_EQ(seq->size() % kKvBlockTokens, 0);
        EXPECT_TRUE(same_bits(run_rest(m.model, *seq, branch, 32), fresh_logits(m.model, policy, branch)))
            << "cut at " << cut << ", reused " << seq->size();
      }
      const KvPoolStats s = pool.stats();
      EXPECT_EQ(s.requantizations, 0);
      EXPECT_EQ(s.quantizations > 0, policy.quantizes());
      EXPECT_GE(s.prefix_hits, 1);
      EXPECT_LE(s.used_bytes, s.budget_bytes);
    }
  }
}

// A branch inside the recent window of a cached sequence recomputes only from the branch point;
// one further back must also recompute the windows its queries read at full precision.
TEST(KvPrefixCache, BranchInsideTheWindowReusesUpToTheBranch) {
  Model m("tiny-toolcaller");
  std::mt19937 rng(11);
  const KvPolicy policy = KvPolicy::parse("protect").with_recent(32).with_sink(0);
  KvPool pool(m.weights.spec, kBudget, policy, true);
  Conversation a;
  while (a.size() < 160) add_random_turns(a, rng, 1, m.weights.spec.vocab_size);
  std::fill(a.roles.begin(), a.roles.end(), Role::user);  // int4 everywhere: every block can leave
  {
    auto seq = pool.open(a.ids, a.roles);
    run_rest(m.model, *seq, a, 160);
    seq->publish();
  }
  // Inside the last window (positions 128..159). Each branch, as it runs past its own window, drops
  // the full-precision rows behind it that no other sequence holds, so later branches that reach
  // further back would recompute more: go from the earliest branch point to the latest.
  for (int64_t cut : {130, 144, 150, 159}) {
    Conversation branch = a.prefix(cut);
    add_random_turns(branch, rng, 20, m.weights.spec.vocab_size);
    auto seq = pool.open(branch.ids, branch.roles);
    EXPECT_EQ(seq->size(), cut / kKvBlockTokens * kKvBlockTokens) << cut;
    EXPECT_TRUE(same_bits(run_rest(m.model, *seq, branch, 16), fresh_logits(m.model, policy, branch))) << cut;
  }
  // Position 40 sits in blocks whose full-precision rows are gone: its queries must recompute
  // everything back to where the windows start.
  Conversation far = a.prefix(41);
  add_random_turns(far, rng, 20, m.weights.spec.vocab_size);
  auto seq = pool.open(far.ids, far.roles);
  EXPECT_LT(seq->size(), 32);
  EXPECT_TRUE(same_bits(run_rest(m.model, *seq, far, 16), fresh_logits(m.model, policy, far)));
  EXPECT_EQ(pool.stats().requantizations, 0);
}

TEST(KvPrefixCache, TrimAnywhereAndReextendEqualsFresh) {
  for (const char* name : kModels) {
    Model m(name);
    std::mt19937 rng(23);
    for (const KvPolicy& policy : policies()) {
      SCOPED_TRACE(std::string(name) + " / " + policy.describe());
      KvPool pool(m.weights.spec, kBudget, policy, true);
      Conversation c;
      add_random_turns(c, rng, 120, m.weights.spec.vocab_size);
      auto seq = pool.open(c.ids, c.roles);
      run_rest(m.model, *seq, c, 32);
      for (int i = 0; i < 4; ++i) {
        const int64_t before = seq->size();
        const int64_t cut = i == 0 ? before - 1 : std::uniform_int_distribution<int64_t>(1, before - 1)(rng);
        const int64_t kept = seq->trim(cut);
        EXPECT_LE(kept, cut);
        EXPECT_EQ(seq->size(), kept);
        // One token back from the end nothing else is lost: the rows the recomputed query reads
        // at full precision are still there.
        if (i == 0) {
          EXPECT_EQ(kept, cut);
        }
        c = c.prefix(cut);
        add_random_turns(c, rng, std::uniform_int_distribution<int64_t>(5, 50)(rng), m.weights.spec.vocab_size);
        EXPECT_TRUE(same_bits(run_rest(m.model, *seq, c, 13), fresh_logits(m.model, policy, c)))
            << "cut at " << cut << ", kept " << kept;
      }
      EXPECT_EQ(pool.stats().requantizations, 0);
    }
  }
}

TEST(KvPrefixCache, SetSizeCutsExactlyOrRefusesWithoutChange) {
  Model m("tiny-toolcaller");
  std::mt19937 rng(3);
  const KvPolicy policy = KvPolicy::parse("int4");
  KvPool pool(m.weights.spec, kBudget, policy, true);
  Conversation c;
  add_random_turns(c, rng, 100, m.weights.spec.vocab_size);
  auto seq = pool.open(c.ids, c.roles);
  run_rest(m.model, *seq, c, 100);
  // Block 3 (48..63) left the window and kept only int4 rows: 50 would need them at bf16.
  EXPECT_THROW(seq->set_size(50), Error);
  EXPECT_EQ(seq->size(), 100);
  seq->set_size(96);  // the start of the partly written last block: exact
  EXPECT_EQ(seq->size(), 96);
  seq->set_size(48);  // a block boundary: blocks 0..2 are read quantized, nothing else needed
  EXPECT_EQ(seq->size(), 48);
  c = c.prefix(48);
  add_random_turns(c, rng, 30, m.weights.spec.vocab_size);
  EXPECT_TRUE(same_bits(run_rest(m.model, *seq, c, 30), fresh_logits(m.model, policy, c)));
}

// A later turn reuses the tokens the model generated in the earlier one (greedy decoding here).
TEST(KvPrefixCache, GeneratedTokensAreReusedByTheNextTurn) {
  Model m("tiny-toolcaller");
  std::mt19937 rng(8);
  const KvPolicy policy = KvPolicy::parse("protect").with_recent(32);
  KvPool pool(m.weights.spec, kBudget, policy, true);
  Conversation turn;
  add_random_turns(turn, rng, 70, m.weights.spec.vocab_size);
  {
    auto seq = pool.open(turn.ids, turn.roles);
    std::vector<float> logits = run_rest(m.model, *seq, turn, 64);
    for (int i = 0; i < 40; ++i) {
      const auto next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      turn.ids.push_back(next);
      turn.roles.push_back(Role::assistant);
      logits = run_rest(m.model, *seq, turn, 1);
    }
    seq->publish();
    EXPECT_EQ(seq->size(), 110);
  }
  add_random_turns(turn, rng, 25, m.weights.spec.vocab_size);
  auto seq = pool.open(turn.ids, turn.roles);
  EXPECT_EQ(seq->size(), 96);  // every complete block, generated tokens included
  EXPECT_TRUE(same_bits(run_rest(m.model, *seq, turn, 64), fresh_logits(m.model, policy, turn)));
  EXPECT_EQ(pool.stats().reused_tokens, 96);
}

// Roles decide formats, formats decide the rows: the same ids with other roles must not be reused.
TEST(KvPrefixCache, SameTokensWithOtherFormatsAreNotReused) {
  Model m("tiny-toolcaller");
  std::mt19937 rng(4);
  const KvPolicy policy = KvPolicy::parse("protect").with_recent(32);
  KvPool pool(m.weights.spec, kBudget, policy, true);
  Conversation c;
  add_random_turns(c, rng, 80, m.weights.spec.vocab_size);
  std::fill(c.roles.begin(), c.roles.end(), Role::user);
  {
    auto seq = pool.open(c.ids, c.roles);
    run_rest(m.model, *seq, c, 80);
    seq->publish();
  }
  Conversation other = c;
  other.roles[40] = Role::tools;  // block 2 becomes bf16: it and everything after it differ
  auto seq = pool.open(other.ids, other.roles);
  EXPECT_EQ(seq->size(), 32);
  EXPECT_TRUE(same_bits(run_rest(m.model, *seq, other, 80), fresh_logits(m.model, policy, other)));
  Conversation same_formats = c;
  same_formats.roles[40] = Role::reasoning;  // still int4: the cached rows are the same
  auto again = pool.open(same_formats.ids, same_formats.roles);
  EXPECT_EQ(again->size(), 64);
}

}  // namespace
}  // namespace keel::kv
