// What keel serve runs with, decided before anything loads (plan/serving_budget.h): the pool, the
// policy and why, the default turns at once, the preparation budget, and the refusals with their
// reasons. On the bundled model: 4 layers x 2 KV heads x 64 dims, 2,048 bf16 bytes per token.
#include <gtest/gtest.h>

#include <string>

#include "keel/plan/serving_budget.h"
#include "keel/util/error.h"
#include "test_support.h"

namespace keel::plan {
namespace {

const arch::ModelSource& tiny_model() {
  static const arch::ModelSource model = arch::resolve_model(test::source_dir() / "models/tiny-toolcaller");
  return model;
}

ServingRequest tiny(double memory_gib) {
  ServingRequest r;
  r.plan.memory_gib = memory_gib;
  return r;
}

std::string refusal(const ServingRequest& r) {
  try {
    serving_budget(tiny_model(), r);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PlanServingBudget, AutoTakesFullPrecisionAndAPoolOfOneFullContext) {
  const ServingBudget b = serving_budget(tiny_model(), tiny(1));
  EXPECT_EQ(b.plan.context, kDefaultServeContext);  // the model's 32,768
  EXPECT_EQ(b.policy.describe(), kv::KvPolicy().describe());
  EXPECT_EQ(b.policy_origin, "auto: the most precise preset that fits is full");
  EXPECT_EQ(b.kv_budget_bytes, int64_t{2048} * 32768);
  EXPECT_EQ(b.default_parallel, 8);  // 32,768 tokens of pool / 4,096 per turn
  const uint64_t committed = b.plan.weights.bytes.value() + static_cast<uint64_t>(b.kv_budget_bytes) + b.plan.scratch.total();
  EXPECT_EQ(b.preparation_budget_bytes, b.plan.ceiling.bytes - committed);
}

TEST(PlanServingBudget, ASmallerContextAndAQuantizedSpec) {
  ServingRequest r = tiny(1);
  r.plan.context = 4096;
  r.kv_policy = "default=int8";
  const ServingBudget b = serving_budget(tiny_model(), r);
  EXPECT_EQ(b.policy_origin, "--kv-policy default=int8");
  // The pool still gets a full-precision context's room (other sessions' prefixes stay cached).
  EXPECT_EQ(b.kv_budget_bytes, int64_t{2048} * 4096);
  // Under 2 x 4,096 int8 tokens fit in 8 MiB: the floor of 2 turns.
  EXPECT_EQ(b.default_parallel, 2);
}

TEST(PlanServingBudget, RefusalsSayWhatToChange) {
  ServingRequest r = tiny(1);
  r.plan.context = 40000;
  EXPECT_NE(refusal(r).find("more than the model's max_position_embeddings (32768"), std::string::npos) << refusal(r);
  r = tiny(1);
  r.kv_memory_gib = 0.001;
  EXPECT_NE(refusal(r).find("holds less than one 32768-token context"), std::string::npos) << refusal(r);
  r = tiny(1);
  r.kv_policy = "nonsense";
  EXPECT_FALSE(refusal(r).empty());
  r = tiny(0.02);  // 20 MiB: the weights fit, a 32k context does not
  EXPECT_FALSE(refusal(r).empty());
}

TEST(PlanServingBudget, KvMemoryGivesThePoolItsSize) {
  ServingRequest r = tiny(1);
  r.kv_memory_gib = 0.25;
  const ServingBudget b = serving_budget(tiny_model(), r);
  EXPECT_EQ(b.kv_budget_bytes, int64_t{1} << 28);
  EXPECT_EQ(b.default_parallel, 8);  // capped
}

}  // namespace
}  // namespace keel::plan
