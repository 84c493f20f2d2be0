// KV taken before each pass (KvSequence::prepare_pass, KvPool::make_room): the blocks a pass
// writes are allocated before it starts, and the bytes it then still takes to quantize blocks
// leaving the recent window are never more than prepare_pass said. So a pass that starts cannot
// run out of memory halfway, and a full pool is found where the scheduler can still make room.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "keel/arch/model_loader.h"
#include "keel/arch/transformer.h"
#include "keel/engine/forward_loop.h"
#include "keel/kv/kv_footprint.h"
#include "keel/kv/kv_pool.h"
#include "keel/model/weights.h"
#include "keel/util/error.h"
#include "test_support.h"

namespace keel::kv {
namespace {

using chat::Role;

int64_t quantized_bytes(const KvPoolStats& st) {
  int64_t n = 0;
  for (KvFormat f : kAllKvFormats)
    if (f != KvFormat::BF16) n += st.bytes(f);
  return n;
}

// The pass alone, past run_pass: these tests check the protocol run_pass keeps.
void forward_last(Transformer& model, KvSequence& seq, std::span<const int32_t> ids, std::vector<float>& logits) {
  const int64_t row = static_cast<int64_t>(ids.size()) - 1;
  const ForwardSegment segment{ids, &seq, std::span<const int64_t>(&row, 1), logits.data()};
  model.forward(std::span(&segment, 1));
}

struct Model {
  explicit Model(const char* name) : weights(arch::load_model(test::shared_dir() / "models" / name)), model(weights, pool) {}
  ModelWeights weights;
  ThreadPool pool{2};
  Transformer model;
};

class PreparePass : public ::testing::TestWithParam<const char*> {};

TEST_P(PreparePass, APassTakesNoMoreThanItWasPreparedFor) {
  static Model m("tiny-toolcaller");
  const KvPolicy policy = KvPolicy::parse(GetParam()).with_recent(32);
  KvPool pool(m.weights.spec, int64_t{64} << 20, policy, true, 4096);
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(m.weights.spec.vocab_size - 1));
  std::uniform_int_distribution<int> role(0, static_cast<int>(chat::kRoleCount) - 1), chunk(1, 90);
  auto seq = pool.open({}, {});
  std::vector<float> logits(static_cast<size_t>(m.weights.spec.vocab_size));
  int64_t prepared_total = 0;
  while (seq->size() < 1500) {
    const int n = chunk(rng);
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (auto& t : ids) t = token(rng);
    const std::vector<Role> roles(static_cast<size_t>(n), static_cast<Role>(role(rng)));
    seq->append_tokens(ids, roles);
    const int64_t blocks_before = pool.stats().blocks_live;
    const int64_t prepared = seq->prepare_pass();
    EXPECT_GE(pool.stats().blocks_live - blocks_before, 0);
    pool.make_room(prepared);
    const int64_t quantized_before = quantized_bytes(pool.stats()), live_before = pool.stats().blocks_live;
    forward_last(m.model, *seq, ids, logits);
    // No block was taken during the pass: they were all taken before it.
    EXPECT_LE(pool.stats().blocks_live, live_before);
    EXPECT_LE(quantized_bytes(pool.stats()) - quantized_before, prepared) << "at " << seq->size();
    prepared_total += prepared;
  }
  if (policy.describe().find("int") != std::string::npos) { EXPECT_GT(prepared_total, 0) << "nothing was ever quantized"; }
}

INSTANTIATE_TEST_SUITE_P(Policies, PreparePass, ::testing::Values("int8", "int4", "protect", "default=int2"));

TEST(PreparePassPool, AFullPoolIsFoundBeforeThePass) {
  static Model m("tiny-toolcaller");
  const KvBlockLayout layout(m.weights.spec);
  // Room for three bf16 blocks: a fourth is refused by prepare_pass, before any row is written.
  KvPool pool(m.weights.spec, 3 * static_cast<int64_t>(layout.block_bytes(KvFormat::BF16)), KvPolicy(), true, 4096);
  auto seq = pool.open({}, {});
  std::vector<int32_t> ids(3 * 16 + 1, 7);
  const std::vector<Role> roles(ids.size(), Role::user);
  seq->append_tokens(ids, roles);
  EXPECT_THROW(seq->prepare_pass(), CapacityError);
  seq->set_size(seq->size());  // gives back what prepare_pass took
  EXPECT_EQ(pool.stats().used_bytes, 0);
  // Three blocks' worth fits, and then the pass runs.
  ids.resize(3 * 16);
  seq->append_tokens(ids, std::vector<Role>(ids.size(), Role::user));
  EXPECT_NO_THROW(pool.make_room(seq->prepare_pass()));
  std::vector<float> logits(static_cast<size_t>(m.weights.spec.vocab_size));
  EXPECT_NO_THROW(forward_last(m.model, *seq, ids, logits));
  EXPECT_EQ(seq->size(), 48);
}

TEST(PreparePassPool, RunPassLeavesEverySequenceAsItWasWhenThePoolIsFull) {
  static Model m("tiny-toolcaller");
  const KvBlockLayout layout(m.weights.spec);
  const auto block = static_cast<int64_t>(layout.block_bytes(KvFormat::BF16));
  KvPool pool(m.weights.spec, 3 * block, KvPolicy(), true, 4096);
  const auto vocab = static_cast<size_t>(m.weights.spec.vocab_size);
  std::vector<float> logits_a(vocab), logits_b(vocab);
  const std::vector<int32_t> ids(33, 7);
  const std::vector<Role> roles(ids.size(), Role::user);
  const int64_t last = 15;
  auto a = pool.open({}, {});
  forward_tokens(m.model, *a, std::span(ids).first(16), std::span(roles).first(16), std::span(&last, 1), logits_a);
  ASSERT_EQ(pool.stats().used_bytes, block);
  // a's second block and b's three: five blocks where three fit.
  auto b = pool.open({}, {});
  const int64_t b_last = 32;
  const SequencePass batch[] = {
      {a.get(), std::span(ids).first(16), std::span(roles).first(16), std::span(&last, 1), logits_a},
      {b.get(), ids, roles, std::span(&b_last, 1), logits_b}};
  EXPECT_THROW(run_pass(m.model, batch), CapacityError);
  EXPECT_EQ(a->size(), 16);
  EXPECT_EQ(a->token_ids().size(), 16u);
  EXPECT_EQ(b->size(), 0);
  EXPECT_TRUE(b->token_ids().empty());
  EXPECT_EQ(pool.stats().used_bytes, block);
  // Without b, a's pass fits, and it runs from where a was.
  EXPECT_NO_THROW(run_pass(m.model, std::span(batch).first(1)));
  EXPECT_EQ(a->size(), 32);
}

// Prefills a whole context in chunks of 256 into a pool of `budget` bytes; true when it all fit.
bool whole_context_fits(Model& m, const KvPolicy& policy, int64_t context, int64_t budget) {
  KvPool pool(m.weights.spec, budget, policy, true, context);
  auto seq = pool.open({}, {});
  std::vector<float> logits(static_cast<size_t>(m.weights.spec.vocab_size));
  try {
    while (seq->size() < context) {
      const int64_t n = std::min<int64_t>(256, context - seq->size());
      const std::vector<int32_t> ids(static_cast<size_t>(n), 11);
      const std::vector<Role> roles(ids.size(), Role::tool_result);
      const int64_t row = n - 1;
      forward_tokens(m.model, *seq, ids, roles, std::span(&row, 1), logits);
    }
  } catch (const CapacityError&) {
    return false;
  }
  return true;
}

TEST(PreparePassPool, OneContextAtItsPeakFitsTheContextBytesPlusOnePass) {
  static Model m("tiny-toolcaller");
  const int64_t context = 1024;
  for (const char* spec : {"int8", "int4", "protect"}) {
    const KvPolicy policy = KvPolicy::parse(spec);
    const int64_t between = kv_context_bytes(m.weights.spec, policy, context, Role::tool_result);
    const int64_t pass = kv_pass_bytes(m.weights.spec, policy, 256);
    EXPECT_TRUE(whole_context_fits(m, policy, context, between + pass)) << spec;
    // Without the pass's share the last chunks find the pool short: blocks leaving the window keep
    // their bf16 rows until their pass ends.
    EXPECT_FALSE(whole_context_fits(m, policy, context, between)) << spec;
  }
  // A policy that never quantizes holds nothing extra during a pass (no sliding layers here).
  EXPECT_EQ(kv_pass_bytes(m.weights.spec, KvPolicy(), 256), 0);
}

}  // namespace
}  // namespace keel::kv
