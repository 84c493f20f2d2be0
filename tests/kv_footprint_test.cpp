// The KV byte arithmetic every sizer uses (kv_footprint.h): kv_context_bytes(), what a context must
// have room for, is the peak of what one sequence holds (kv_sequence_bytes(), which the pool tests
// match against the pool's own counts) over every size up to the context, for full, sliding and
// MLA-like layer groups under every kind of policy.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "keel/kv/kv_footprint.h"
#include "keel/kv/kv_window.h"
#include "keel/util/error.h"

namespace keel::kv {
namespace {

using chat::Role;

TEST(KvFootprint, ContextBytesAreThePeakOverEverySizeUpToTheContext) {
  const std::vector<std::vector<KvGroupShape>> models = {
      {{3, {{4, 64}}, 0}},                                    // full attention only
      {{2, {{4, 64}}, 0}, {5, {{4, 64}}, 20}},                // sliding window wider than a block
      {{4, {{2, 32}}, 8}},                                    // sliding only, window inside a block
      {{1, {{1, 512}, {1, 64}}, 0}, {3, {{4, 64}}, 300}},     // an MLA-like latent + a wide window
  };
  const std::vector<KvPolicy> policies = {
      KvPolicy::parse("full"), KvPolicy::parse("int8"), KvPolicy::parse("int4"), KvPolicy::parse("protect"),
      KvPolicy::parse("protect").with_recent(32), KvPolicy::parse("default=int4 sink=20 recent=8"),
      KvPolicy::parse("default=int8 recent=100")};
  constexpr int64_t kMax = 900;
  for (size_t m = 0; m < models.size(); ++m) {
    for (const KvPolicy& policy : policies) {
      for (Role role : {Role::user, Role::system, Role::tool_call}) {
        SCOPED_TRACE("model " + std::to_string(m) + " / " + policy.describe() + " / " + std::string(chat::role_name(role)));
        const std::vector<Role> roles(kMax, role);
        int64_t peak = 0;
        for (int64_t n = 0; n <= kMax; ++n) {
          peak = std::max(peak, kv_sequence_bytes(models[m], policy, std::span(roles).first(static_cast<size_t>(n))));
          ASSERT_EQ(kv_context_bytes(models[m], policy, n, role), peak) << n;
        }
      }
    }
  }
}

TEST(KvFootprint, SlidingGroupsStopGrowingAtTheirWindow) {
  const std::vector<KvGroupShape> model = {{2, {{4, 64}}, 0}, {5, {{4, 64}}, 100}};
  const KvPolicy full = KvPolicy::parse("full");
  const int64_t full_block = model[0].token_bytes(KvFormat::BF16) * kKvBlockTokens;
  const int64_t sliding_block = model[1].token_bytes(KvFormat::BF16) * kKvBlockTokens;
  // Window 100, one more block kept for the next turn, both ends partial: at most 9 blocks.
  for (int64_t n : {4096, 4097, 10000, 131072}) {
    const int64_t sliding = kv_context_bytes(model, full, n) - blocks_for_tokens(n) * full_block;
    EXPECT_GE(sliding, 7 * sliding_block) << n;
    EXPECT_LE(sliding, 9 * sliding_block) << n;
  }
  // Before the window fills, every layer holds every block.
  EXPECT_EQ(kv_context_bytes(model, full, 64), 4 * (full_block + sliding_block));
  EXPECT_THROW(kv_context_bytes(model, full, -1), Error);
}

}  // namespace
}  // namespace keel::kv
