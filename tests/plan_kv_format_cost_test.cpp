// Per-format byte costs of one cached vector, preset names, and what the planner counts per preset.
#include <gtest/gtest.h>

#include "keel/kv/kv_format_cost.h"
#include "keel/plan/kv_bytes.h"
#include "keel/plan/kv_presets.h"
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
  EXPECT_EQ(plan::parse_kv_preset("protect"), plan::KvPreset::Protect);
  EXPECT_EQ(plan::parse_kv_preset("auto"), plan::KvPreset::Auto);
  try {
    plan::parse_kv_preset("fp8");
    FAIL();
  } catch (const keel::Error& e) {
    EXPECT_NE(std::string(e.what()).find("fp8"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("protect"), std::string::npos);
  }
}

// One layer storing one vector of 32 per token: 64 bytes at bf16, 16 + 2 + 2 = 20 at int4 and
// 32 + 2 = 34 at int8; a block of 16 tokens 1024, 320 and 544 bytes.
plan::AttentionLayout one_layer(keel::AttentionKind kind, int64_t window) {
  plan::AttentionLayout layout;
  layout.num_layers = 1;
  layout.groups.push_back({plan::LayerShape{kind, {{1, 32}}, window, 0, 0, ""}, 1});
  return layout;
}

// The planner counts what the KV pool stores (keel/kv/kv_footprint.h): whole blocks, the sinks'
// whole block, the recent window and the blocks a branch inside it re-reads, and the peak on the
// way to the context rather than the bytes at the context itself.
TEST(PlanKvPolicy, ProtectKeepsItsSinkBlockAndRecentWindowsAtBf16) {
  const auto layout = one_layer(keel::AttentionKind::Full, 0);
  // The peak is at 9,999 tokens (625 blocks, the last one partly filled): block 0 (4 sinks), the
  // 17 blocks inside the last 256 tokens, and the 16 before them (kept at bf16 too, for branches)
  // are bf16; blocks 1..607 int4 (the 16 branch blocks in both forms).
  EXPECT_EQ(plan::kv_bytes_for_context(layout, plan::KvPreset::Protect, 10000), 607u * 320 + 34u * 1024);
  // Short contexts are all bf16.
  EXPECT_EQ(plan::kv_bytes_for_context(layout, plan::KvPreset::Protect, 100), 7u * 1024);
  // Uniform presets: whole blocks; one token short of a block boundary the last block is still
  // incomplete, and so bf16.
  EXPECT_EQ(plan::kv_bytes_for_context(layout, plan::KvPreset::Full, 7), 1024u);
  EXPECT_EQ(plan::kv_bytes_for_context(layout, plan::KvPreset::Int8, 10000), 624u * 544 + 1024);
  EXPECT_EQ(plan::kv_bytes_for_context(layout, plan::KvPreset::Int4, 10000), 624u * 320 + 1024);
  EXPECT_THROW(plan::kv_bytes_for_context(layout, plan::KvPreset::Auto, 7), keel::Error);
}

TEST(PlanKvPolicy, SlidingLayersHoldTheirWindowAndOneBlockMore) {
  const auto layout = one_layer(keel::AttentionKind::Sliding, 100);
  // Window 100, plus the block the next turn resumes from, plus the partly filled blocks at both
  // ends: 9 blocks at the peak. At 9,985 tokens it keeps blocks 616-624: the window of a query 16
  // positions back (9,969) starts at 9,870, in block 616.
  EXPECT_EQ(plan::kv_bytes_for_context(layout, plan::KvPreset::Full, 10000), 9u * 1024);
  EXPECT_EQ(plan::kv_bytes_for_context(layout, plan::KvPreset::Full, 1000000), 9u * 1024);
  // int8 quantizes blocks as they complete (the window is wider than the recent window of 0).
  EXPECT_EQ(plan::kv_bytes_for_context(layout, plan::KvPreset::Int8, 10000), 8u * 544 + 1024);
  // protect: the recent window (256) is wider than the sliding window, so nothing is quantized and
  // no sink survives the window.
  EXPECT_EQ(plan::kv_bytes_for_context(layout, plan::KvPreset::Protect, 10000), 9u * 1024);
}
