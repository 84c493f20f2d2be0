// The paged KV pool: chunk invariance under every policy, blocks stored in their formats and
// quantized exactly once, byte accounting, LRU eviction under the budget, exhaustion.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "keel/arch/model_loader.h"
#include "keel/arch/transformer.h"
#include "keel/kv/kv_footprint.h"
#include "keel/kv/kv_pool.h"
#include "keel/model/weights.h"
#include "keel/util/error.h"
#include "kv_reuse_support.h"
#include "test_support.h"

namespace keel::kv {
namespace {

using chat::Role;

using reuse::Conversation;
using reuse::kBudget;
using reuse::Model;
using reuse::random_conversation;
using reuse::run_rest;
using reuse::same_bits;

// Complete blocks out of the window of the last position whose format is below bf16: what one
// sequence of these roles quantizes, once per layer.
int64_t quantized_blocks(const KvPolicy& policy, const Conversation& c) {
  int64_t n = 0;
  for (int64_t b = 0; b < window_start_block(c.size() - 1, policy.recent()); ++b)
    if (policy.block_format(std::span(c.roles).subspan(static_cast<size_t>(b * kKvBlockTokens), kKvBlockTokens),
                            b * kKvBlockTokens) != KvFormat::BF16)
      ++n;
  return n;
}

TEST(KvPool, ChunkedPrefillEqualsOneShotUnderEveryPolicy) {
  // Gemma 3: five sliding-window layers (window 8, inside one block) to one full layer.
  for (const char* name :
       {"tiny-toolcaller", "tiny-qwen3-random", "tiny-gemma3-random", "tiny-qwen3moe-random-mlx4", "tiny-gptoss-random",
        "tiny-gemma4-random", "tiny-qwen3next-random"}) {
    Model m(name);
    std::mt19937 rng(1);
    const Conversation c = random_conversation(rng, 150, m.weights.spec.vocab_size);
    std::vector<float> full;
    for (const KvPolicy& policy : {KvPolicy::parse("full"), KvPolicy::parse("int8"), KvPolicy::parse("int4"),
                                   KvPolicy::parse("protect").with_recent(32),
                                   KvPolicy::parse("protect-k").with_recent(32),
                                   KvPolicy::parse("default=int2 recent=32")}) {
      for (bool rotate : {true, false}) {
        SCOPED_TRACE(std::string(name) + " / " + policy.describe() + (rotate ? " rotated" : ""));
        std::vector<float> reference;
        for (int64_t chunk : {int64_t{150}, int64_t{64}, int64_t{7}, int64_t{1}}) {
          KvPool pool(m.weights.spec, kBudget, policy, rotate);
          auto seq = pool.open(c.ids, c.roles);
          const std::vector<float> logits = run_rest(m.model, *seq, c, chunk);
          if (reference.empty()) reference = logits;
          EXPECT_TRUE(same_bits(logits, reference)) << "chunks of " << chunk;
          EXPECT_EQ(pool.stats().requantizations, 0);
        }
        // Quantization really happens: every quantizing policy moves the logits.
        if (full.empty()) full = reference;
        EXPECT_EQ(same_bits(reference, full), !policy.quantizes());
      }
    }
  }
}

// gpt-oss alternates sliding (window 8) and full layers: after 300 tokens its sliding layers hold
// a few blocks each while the full layers hold all 19, exactly what the footprint (and so the
// planner) counts.
TEST(KvPool, GptOssSlidingLayersHoldOnlyTheirWindow) {
  Model m("tiny-gptoss-random");
  std::mt19937 rng(4);
  const Conversation c = random_conversation(rng, 300, m.weights.spec.vocab_size);
  for (const KvPolicy& policy : {KvPolicy::parse("full"), KvPolicy::parse("int8"), KvPolicy::parse("protect")}) {
    SCOPED_TRACE(policy.describe());
    KvPool pool(m.weights.spec, kBudget, policy, true);
    auto seq = pool.open(c.ids, c.roles);
    run_rest(m.model, *seq, c, 64);
    const int64_t used = pool.stats().used_bytes;
    EXPECT_EQ(used, kv_sequence_bytes(m.weights.spec, policy, c.roles));
    ModelSpec all_full = m.weights.spec;
    for (LayerSpec& l : all_full.layers) l.attention = AttentionKind::Full;
    EXPECT_LT(used, kv_sequence_bytes(all_full, policy, c.roles) * 2 / 3);
  }
}

TEST(KvPool, BlocksTakeTheirFormatAndAreQuantizedOnce) {
  Model m("tiny-toolcaller");
  std::mt19937 rng(2);
  const KvPolicy policy = KvPolicy::parse("protect").with_recent(32);
  KvPool pool(m.weights.spec, kBudget, policy, true);
  const int64_t layers = m.weights.spec.num_layers;
  Conversation c = random_conversation(rng, 200, m.weights.spec.vocab_size);
  {
    auto seq = pool.open(c.ids, c.roles);
    run_rest(m.model, *seq, c, 48);
    // The pool holds exactly what the footprint arithmetic says, in the formats the roles ask for.
    KvPoolStats s = pool.stats();
    EXPECT_EQ(s.used_bytes, kv_sequence_bytes(m.weights.spec, policy, c.roles));
    EXPECT_EQ(s.bytes(KvFormat::BF16) + s.bytes(KvFormat::Int8) + s.bytes(KvFormat::Int4), s.used_bytes);
    EXPECT_GT(s.bytes(KvFormat::Int4), 0);
    EXPECT_EQ(s.quantizations, layers * quantized_blocks(policy, c));
    EXPECT_GT(s.quantizations, 0);
    seq->publish();
  }
  KvPoolStats s = pool.stats();
  EXPECT_EQ(s.blocks_in_use, 0);
  EXPECT_EQ(s.blocks_cached, 200 / kKvBlockTokens);
  EXPECT_EQ(s.blocks_evictable, 1);  // only the last cached block; each parent is held by its child
  EXPECT_EQ(s.blocks_live, s.blocks_cached);

  // The next turn reuses the cached blocks; over both sequences every block is quantized once.
  Conversation next = c;
  const Conversation more = random_conversation(rng, 90, m.weights.spec.vocab_size);
  next.ids.insert(next.ids.end(), more.ids.begin(), more.ids.end());
  next.roles.insert(next.roles.end(), more.roles.begin(), more.roles.end());
  auto seq = pool.open(next.ids, next.roles);
  EXPECT_EQ(seq->size(), 192);
  run_rest(m.model, *seq, next, 32);
  s = pool.stats();
  EXPECT_EQ(s.quantizations, layers * quantized_blocks(policy, next));
  EXPECT_EQ(s.requantizations, 0);
  EXPECT_EQ(s.prefix_hits, 1);
  EXPECT_EQ(s.prefix_misses, 1);
  EXPECT_EQ(s.reused_tokens, 192);
}

TEST(KvPool, EvictsLeastRecentlyUsedWithinTheBudgetAndStillAnswers) {
  Model m("tiny-toolcaller");
  std::mt19937 rng(9);
  const KvPolicy policy = KvPolicy::parse("int4");
  const int64_t block = static_cast<int64_t>(KvBlockLayout(m.weights.spec).block_bytes(KvFormat::BF16));
  KvPool pool(m.weights.spec, 10 * block, policy, true);
  std::vector<Conversation> sessions;
  for (int i = 0; i < 8; ++i) {
    sessions.push_back(random_conversation(rng, 100, m.weights.spec.vocab_size));
    auto seq = pool.open(sessions.back().ids, sessions.back().roles);
    EXPECT_EQ(seq->size(), 0);
    run_rest(m.model, *seq, sessions.back(), 25);
    EXPECT_LE(pool.stats().used_bytes, pool.budget_bytes());
    seq->publish();
  }
  KvPoolStats s = pool.stats();
  EXPECT_GT(s.evictions, 0);
  EXPECT_LE(s.used_bytes, s.budget_bytes);
  EXPECT_EQ(s.blocks_in_use, 0);

  auto extend = [&](Conversation c) {
    const Conversation more = random_conversation(rng, 10, m.weights.spec.vocab_size);
    c.ids.insert(c.ids.end(), more.ids.begin(), more.ids.end());
    c.roles.insert(c.roles.end(), more.roles.begin(), more.roles.end());
    return c;
  };
  // The oldest session is gone, the newest is still cached and answers exactly.
  const Conversation oldest = extend(sessions.front());
  EXPECT_EQ(pool.open(oldest.ids, oldest.roles)->size(), 0);
  const Conversation newest = extend(sessions.back());
  auto seq = pool.open(newest.ids, newest.roles);
  EXPECT_EQ(seq->size(), 96);
  const std::vector<float> logits = run_rest(m.model, *seq, newest, 110);
  KvPool fresh(m.weights.spec, kBudget, policy, true);
  auto reference = fresh.open(newest.ids, newest.roles);
  EXPECT_TRUE(same_bits(logits, run_rest(m.model, *reference, newest, 110)));
  EXPECT_LE(pool.stats().used_bytes, pool.budget_bytes());
  EXPECT_EQ(pool.stats().requantizations, 0);
}

TEST(KvPool, ExhaustionIsAnErrorAndThePoolRecovers) {
  Model m("tiny-toolcaller");
  std::mt19937 rng(6);
  const KvPolicy policy = KvPolicy::parse("full");
  const int64_t block = static_cast<int64_t>(KvBlockLayout(m.weights.spec).block_bytes(KvFormat::BF16));
  KvPool pool(m.weights.spec, 3 * block, policy, true);
  const Conversation big = random_conversation(rng, 100, m.weights.spec.vocab_size);
  {
    auto seq = pool.open(big.ids, big.roles);
    try {
      run_rest(m.model, *seq, big, 100);
      ADD_FAILURE() << "7 blocks fit a budget of 3";
    } catch (const CapacityError& e) {  // the server is full right now: the client may retry later
      EXPECT_NE(std::string(e.what()).find("KV pool exhausted"), std::string::npos) << e.what();
    }
    EXPECT_EQ(seq->size(), 0);
    seq->set_size(0);  // forgets the tokens of the failed pass
    EXPECT_TRUE(seq->token_ids().empty());
    EXPECT_EQ(pool.stats().used_bytes, 0);  // nothing of the failed pass is kept
  }
  EXPECT_EQ(pool.stats().used_bytes, 0);
  const Conversation small = random_conversation(rng, 40, m.weights.spec.vocab_size);
  auto seq = pool.open(small.ids, small.roles);
  const std::vector<float> logits = run_rest(m.model, *seq, small, 40);
  KvPool fresh(m.weights.spec, kBudget, policy, true);
  auto reference = fresh.open(small.ids, small.roles);
  EXPECT_TRUE(same_bits(logits, run_rest(m.model, *reference, small, 40)));
}

TEST(KvPool, RejectsConfigurationsItCannotServe) {
  ModelSpec s;
  s.num_layers = 2;
  s.num_heads = 8;
  s.num_kv_heads = 4;
  s.head_dim = 8;  // stories260K: too narrow for groups of 32
  s.max_position = 512;
  LayerSpec layer;
  layer.num_heads = 8;
  layer.num_kv_heads = 4;
  layer.head_dim = 8;
  s.layers.assign(2, layer);
  EXPECT_THROW(KvPool(s, kBudget, KvPolicy::parse("int8"), true), Error);
  KvPool full(s, kBudget, KvPolicy::parse("full"), true);
  EXPECT_EQ(full.open(std::vector<int32_t>{1, 2}, std::vector<Role>(2, Role::user))->capacity(), 512);
  EXPECT_THROW(KvPool(s, 100, KvPolicy::parse("full"), true), Error);
  EXPECT_THROW(full.open(std::vector<int32_t>{1, 2}, std::vector<Role>(1, Role::user)), Error);
}

}  // namespace
}  // namespace keel::kv
