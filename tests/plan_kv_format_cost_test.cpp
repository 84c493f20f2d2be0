// Per-format byte costs of one cached vector, and how the presets split tokens across formats.
#include <gtest/gtest.h>

#include "keel/kv/kv_format_cost.h"
#include "keel/plan/kv_policy.h"
#include "keel/util/error.h"

using keel::KvFormat;
using keel::kv_vector_bytes;
namespace plan = keel::plan;

TEST(PlanKvFormatCost, HeadOf128) {
  EXPECT_EQ(kv_vector_bytes(KvFormat::BF16, 128), 128 * 2);
  EXPECT_EQ(kv_vector_bytes(KvFormat::Int8, 128), 128 + 4 * 2);        // 4 groups of 32, bf16 scale each
  EXPECT_EQ(kv_vector_bytes(KvFormat::Int4, 128), 128 / 2 + 4 * (2 + 2));  // scale + zero point per group
}

TEST(PlanKvFormatCost, HeadOf64AndOddSizes) {
  EXPECT_EQ(kv_vector_bytes(KvFormat::Int8, 64), 64 + 2 * 2);
  EXPECT_EQ(kv_vector_bytes(KvFormat::Int4, 64), 32 + 2 * 4);
  // MLA's rope key (64) and latent (512) are separate vectors: 512 -> 16 groups.
  EXPECT_EQ(kv_vector_bytes(KvFormat::Int4, 512), 256 + 16 * 4);
  // A partial group still carries its own scale.
  EXPECT_EQ(kv_vector_bytes(KvFormat::Int8, 80), 80 + 3 * 2);
  EXPECT_EQ(kv_vector_bytes(KvFormat::Int4, 81), 41 + 3 * 4);
}

TEST(PlanKvPolicy, ParsesNamesAndRejectsOthers) {
  EXPECT_EQ(plan::parse_kv_policy("protect"), plan::KvPolicy::Protect);
  EXPECT_EQ(plan::parse_kv_policy("auto"), plan::KvPolicy::Auto);
  try {
    plan::parse_kv_policy("fp8");
    FAIL();
  } catch (const keel::Error& e) {
    EXPECT_NE(std::string(e.what()).find("fp8"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("protect"), std::string::npos);
  }
}

TEST(PlanKvPolicy, ProtectKeepsSinksAndRecentWindowAtBf16) {
  auto s = plan::split_tokens(plan::KvPolicy::Protect, 10000, /*windowed=*/false);
  EXPECT_EQ(s.bf16, 4 + 256);
  EXPECT_EQ(s.int4, 10000 - 260);
  EXPECT_EQ(s.int8, 0);
  // Short contexts are all bf16.
  s = plan::split_tokens(plan::KvPolicy::Protect, 100, false);
  EXPECT_EQ(s.bf16, 100);
  EXPECT_EQ(s.int4, 0);
  // A sliding layer holds only recent tokens: no sinks among them.
  s = plan::split_tokens(plan::KvPolicy::Protect, 1024, /*windowed=*/true);
  EXPECT_EQ(s.bf16, 256);
  EXPECT_EQ(s.int4, 1024 - 256);
}

TEST(PlanKvPolicy, UniformPresets) {
  EXPECT_EQ(plan::split_tokens(plan::KvPolicy::Full, 7, false).bf16, 7);
  EXPECT_EQ(plan::split_tokens(plan::KvPolicy::Int8, 7, false).int8, 7);
  EXPECT_EQ(plan::split_tokens(plan::KvPolicy::Int4, 7, true).int4, 7);
  EXPECT_THROW(plan::split_tokens(plan::KvPolicy::Auto, 7, false), keel::Error);
}
