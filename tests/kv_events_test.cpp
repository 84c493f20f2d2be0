// The prefix cache's events for a router outside the process (kv_events.h, docs/deploy.md):
// replaying them gives exactly the hashes a snapshot lists, through evictions; the hashes of a
// prompt say how much of it open() reuses; the same prefix has the same hashes in another pool of
// the same model and policy (another replica); a reader that fell behind is told to start over.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

#include "keel/kv/kv_events.h"
#include "keel/kv/kv_pool.h"
#include "kv_reuse_support.h"

namespace keel::kv {
namespace {

using reuse::Conversation;
using reuse::kBudget;
using reuse::Model;
using reuse::random_conversation;
using reuse::run_rest;

// A router's view of one pool, kept by its events.
struct Follower {
  uint64_t seq = 0;
  std::multiset<uint64_t> hashes;

  void follow(const KvPool& pool) {
    const auto events = pool.events_since(seq, 1 << 20);
    ASSERT_TRUE(events.has_value());
    for (const KvBlockEvent& e : *events) {
      EXPECT_EQ(e.seq, seq + 1);
      seq = e.seq;
      if (e.kind == KvBlockEvent::Kind::Stored)
        hashes.insert(e.hash);
      else
        hashes.erase(hashes.find(e.hash));
    }
  }
  // Tokens of the leading blocks it holds.
  int64_t cached_tokens(const std::vector<uint64_t>& prefix) const {
    int64_t n = 0;
    while (n < static_cast<int64_t>(prefix.size()) && hashes.contains(prefix[static_cast<size_t>(n)])) ++n;
    return n * kKvBlockTokens;
  }
};

TEST(KvEvents, ReplayedEventsMatchTheCachedBlocksThroughEvictions) {
  Model m("tiny-toolcaller");
  std::mt19937 rng(11);
  const int64_t block = static_cast<int64_t>(KvBlockLayout(m.weights.spec).block_bytes(KvFormat::BF16));
  KvPool pool(m.weights.spec, 10 * block, KvPolicy::parse("int4"), true);
  Follower router;
  std::vector<Conversation> sessions;
  for (int i = 0; i < 8; ++i) {
    sessions.push_back(random_conversation(rng, 100, m.weights.spec.vocab_size));
    {
      auto seq = pool.open(sessions.back().ids, sessions.back().roles);
      run_rest(m.model, *seq, sessions.back(), 25);
      seq->publish();
    }
    router.follow(pool);
    const KvPool::CachedBlocks snapshot = pool.cached_blocks();
    EXPECT_EQ(snapshot.seq, router.seq);
    EXPECT_EQ(std::multiset<uint64_t>(snapshot.hashes.begin(), snapshot.hashes.end()), router.hashes) << "after session " << i;
  }
  ASSERT_GT(pool.stats().evictions, 0);

  // What the events say a prompt would reuse is what open() reuses: the newest session all but
  // its partial block, the oldest (evicted) nothing.
  for (const Conversation* c : {&sessions.back(), &sessions.front()}) {
    const int64_t predicted = router.cached_tokens(pool.prefix_hashes(c->ids, c->roles));
    EXPECT_EQ(pool.open(c->ids, c->roles)->size(), predicted);
  }
  EXPECT_EQ(router.cached_tokens(pool.prefix_hashes(sessions.back().ids, sessions.back().roles)), 96);
}

TEST(KvEvents, TheSamePrefixHasTheSameHashesInEveryPoolOfTheSamePolicy) {
  Model m("tiny-toolcaller");
  std::mt19937 rng(12);
  const Conversation c = random_conversation(rng, 100, m.weights.spec.vocab_size);
  KvPool a(m.weights.spec, kBudget, KvPolicy::parse("int4"), true);
  KvPool b(m.weights.spec, kBudget, KvPolicy::parse("int4"), true);
  KvPool other_policy(m.weights.spec, kBudget, KvPolicy::parse("int8"), true);
  const auto hashes = a.prefix_hashes(c.ids, c.roles);
  EXPECT_EQ(hashes.size(), 6u);  // whole blocks, never the last token
  EXPECT_EQ(b.prefix_hashes(c.ids, c.roles), hashes);
  EXPECT_NE(other_policy.prefix_hashes(c.ids, c.roles)[0], hashes[0]);
  EXPECT_NE(a.prefix_hashes(c.ids, c.roles, 7)[0], hashes[0]);  // another cache namespace (API key)
  // And a published block is announced under the hash prefix_hashes gave.
  {
    auto seq = b.open(c.ids, c.roles);
    run_rest(m.model, *seq, c, 100);
    seq->publish();
  }
  const KvPool::CachedBlocks cached = b.cached_blocks();
  for (uint64_t h : hashes) EXPECT_NE(std::find(cached.hashes.begin(), cached.hashes.end(), h), cached.hashes.end());
}

TEST(KvEventLog, AReaderThatFellBehindOrFollowsAnotherProcessStartsOver) {
  KvEventLog log(4);
  for (uint64_t h = 1; h <= 6; ++h) h % 3 == 0 ? log.removed(h) : log.stored(h, h - 1);
  EXPECT_EQ(log.last_seq(), 6u);
  EXPECT_FALSE(log.since(0, 100).has_value());  // events 1 and 2 are gone
  EXPECT_FALSE(log.since(1, 100).has_value());
  const auto rest = log.since(2, 100);
  ASSERT_TRUE(rest.has_value());
  ASSERT_EQ(rest->size(), 4u);
  EXPECT_EQ(rest->front().seq, 3u);
  EXPECT_EQ(rest->front().kind, KvBlockEvent::Kind::Removed);
  EXPECT_EQ(rest->at(2).kind, KvBlockEvent::Kind::Stored);
  EXPECT_EQ(rest->at(2).parent, 4u);
  EXPECT_EQ(rest->back().seq, 6u);
  EXPECT_EQ(log.since(2, 1)->size(), 1u);
  EXPECT_TRUE(log.since(6, 100)->empty());
  EXPECT_FALSE(log.since(7, 100).has_value());  // numbers this process never gave
}

}  // namespace
}  // namespace keel::kv
