// The runtime KV precision policy: presets, the spec grammar and its errors, block formats, and
// the bytes per token the pool stores under each preset.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "keel/kv/kv_block_layout.h"
#include "keel/kv/kv_footprint.h"
#include "keel/kv/kv_policy.h"
#include "keel/kv/kv_window.h"
#include "keel/util/error.h"

namespace keel::kv {
namespace {

using chat::Role;

std::string error_of(std::string_view spec) {
  try {
    KvPolicy::parse(spec);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(KvPolicy, PresetsMeanWhatThePlannerAssumes) {
  EXPECT_EQ(KvPolicy::parse("full").describe(), "sink=0 recent=0 default=bf16");
  EXPECT_EQ(KvPolicy::parse("int8").describe(), "sink=0 recent=0 default=int8");
  EXPECT_EQ(KvPolicy::parse("int4").describe(), "sink=0 recent=0 default=int4");
  const KvPolicy protect = KvPolicy::parse("protect");
  EXPECT_EQ(protect, KvPolicy::preset(KvPreset::Protect));
  EXPECT_EQ(protect.sink(), kProtectSinkTokens);
  EXPECT_EQ(protect.recent(), kProtectRecentTokens);
  EXPECT_EQ(protect.role_format(Role::system), KvFormat::BF16);
  EXPECT_EQ(protect.role_format(Role::tools), KvFormat::BF16);
  EXPECT_EQ(protect.role_format(Role::tool_call), KvFormat::Int8);
  for (Role r : {Role::scaffolding, Role::user, Role::assistant, Role::tool_result, Role::reasoning})
    EXPECT_EQ(protect.role_format(r), KvFormat::Int4) << chat::role_name(r);
  EXPECT_EQ(protect.describe(), "system=bf16 tools=bf16 tool_call=int8 sink=4 recent=256 default=int4");
  EXPECT_FALSE(KvPolicy::parse("full").quantizes());
  EXPECT_TRUE(KvPolicy::parse("user=int8").quantizes());
}

TEST(KvPolicy, ExplicitSpecParsesInAnyOrderAndDescribesCanonically) {
  const KvPolicy p = KvPolicy::parse("tools=bf16 system=bf16 sink=4 recent=256 tool_call=int8 default=int4");
  EXPECT_EQ(p, KvPolicy::parse("protect"));
  const KvPolicy q = KvPolicy::parse("  default=int2,reasoning=int4  recent=32 user=int2 ");
  EXPECT_EQ(q.describe(), "reasoning=int4 sink=0 recent=32 default=int2");  // user=int2 is the default
  EXPECT_EQ(q.role_format(Role::user), KvFormat::Int2);
  EXPECT_EQ(q.role_format(Role::reasoning), KvFormat::Int4);
  for (const KvPolicy& x : {p, q, KvPolicy::parse("int8"), KvPolicy::parse("tool_result=int8")})
    EXPECT_EQ(KvPolicy::parse(x.describe()), x) << x.describe();
  EXPECT_EQ(KvPolicy::parse("tool_result=int8").default_format(), KvFormat::BF16);  // unnamed roles stay exact
  EXPECT_EQ(p.with_recent(32).recent(), 32);
  EXPECT_EQ(p.with_recent(32).sink(), 4);
}

TEST(KvPolicy, ErrorsNameTheBadWord) {
  EXPECT_NE(error_of("int3").find("'int3'"), std::string::npos);
  EXPECT_NE(error_of("int3").find("protect"), std::string::npos);
  EXPECT_NE(error_of("auto").find("resolved"), std::string::npos);
  EXPECT_NE(error_of("").find("empty"), std::string::npos);
  EXPECT_NE(error_of("usr=int8 default=int4").find("unknown key 'usr'"), std::string::npos);
  EXPECT_NE(error_of("user=int5").find("unknown format 'int5' for user"), std::string::npos);
  EXPECT_NE(error_of("user=int5").find("int2"), std::string::npos);  // lists the valid formats
  EXPECT_NE(error_of("sink=-1").find("sink=-1"), std::string::npos);
  EXPECT_NE(error_of("recent=12x").find("recent=12x"), std::string::npos);
  EXPECT_NE(error_of("user=int8 user=int4").find("'user' is given twice"), std::string::npos);
  EXPECT_NE(error_of("default=int8 bogus").find("'bogus'"), std::string::npos);
  EXPECT_THROW(KvPolicy::preset(KvPreset::Auto), Error);
}

TEST(KvPolicy, BlockTakesTheMostPreciseFormatAnyTokenNeeds) {
  const KvPolicy p = KvPolicy::parse("protect");
  std::vector<Role> roles(kKvBlockTokens, Role::user);
  EXPECT_EQ(p.block_format(roles, 16), KvFormat::Int4);
  EXPECT_EQ(p.block_format(roles, 0), KvFormat::BF16);  // attention sinks
  EXPECT_EQ(p.block_format(roles, 4), KvFormat::Int4);
  roles[9] = Role::tool_call;
  EXPECT_EQ(p.block_format(roles, 32), KvFormat::Int8);
  roles[15] = Role::tools;
  EXPECT_EQ(p.block_format(roles, 32), KvFormat::BF16);
  EXPECT_EQ(more_precise(KvFormat::Int2, KvFormat::Int4), KvFormat::Int4);
  EXPECT_EQ(more_precise(KvFormat::Int8, KvFormat::Int4), KvFormat::Int8);
  EXPECT_EQ(more_precise(KvFormat::Int8, KvFormat::BF16), KvFormat::BF16);
}

// Qwen2.5-0.5B's shape: 24 layers, 2 KV heads of 64. One token's K and V over all layers:
// bf16 24 * 2 * 2 * 128 = 12288 bytes, int8 24 * 2 * 2 * 68 = 6528, int4 24 * 2 * 2 * 40 = 3840.
TEST(KvFootprint, BytesPerTokenPerPresetForARealShape) {
  ModelSpec s;
  s.num_layers = 24;
  s.num_heads = 14;
  s.num_kv_heads = 2;
  s.head_dim = 64;
  for (int64_t i = 0; i < s.num_layers; ++i) {
    LayerSpec l;
    l.num_heads = 14;
    l.num_kv_heads = 2;
    l.head_dim = 64;
    s.layers.push_back(l);
  }
  const KvBlockLayout layout(s);
  EXPECT_EQ(layout.token_bytes(KvFormat::BF16), 12288u);
  EXPECT_EQ(layout.token_bytes(KvFormat::Int8), 6528u);
  EXPECT_EQ(layout.token_bytes(KvFormat::Int4), 3840u);
  EXPECT_EQ(layout.block_bytes(KvFormat::Int4), 3840u * kKvBlockTokens);

  const int64_t n = 32768;  // whole blocks: no partial block to round up
  const std::vector<Role> user(n, Role::user);
  auto held = [&](const char* policy) { return static_cast<double>(kv_sequence_bytes(s, KvPolicy::parse(policy), user)) / n; };
  EXPECT_DOUBLE_EQ(held("full"), 12288.0);
  // Uniform presets keep no window; the last block is complete and quantized too.
  EXPECT_DOUBLE_EQ(held("int8"), 6528.0);
  EXPECT_DOUBLE_EQ(held("int4"), 3840.0);
  // protect, user tokens: the first block (sinks) and the last 256 tokens at bf16, 256 more
  // (what a branch inside the window re-reads) at bf16 and int4, the rest int4.
  const double protect = held("protect");
  EXPECT_DOUBLE_EQ(protect, (16.0 * 12288 + 256 * 12288 + 256 * (12288 + 3840) + (n - 16 - 512) * 3840.0) / n);
  EXPECT_NEAR(protect, 4006.1, 0.1);
  // What a context of n tokens needs room for is the peak on the way there: under int8 one token
  // earlier, when the last block is still incomplete and so at bf16.
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(s, KvPolicy::parse("full"), n), 12288.0);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(s, KvPolicy::parse("int8"), n), (2047.0 * 16 * 6528 + 16 * 12288) / n);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(s, KvPolicy::parse("int4"), n), (2047.0 * 16 * 3840 + 16 * 12288) / n);
  // protect one token earlier: one block fewer has left the windows (one more bf16-only block, one
  // fewer int4 one).
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(s, KvPolicy::parse("protect"), n), protect + 16.0 * (12288 - 3840) / n);
  // A 6k-token system prompt stays bf16 under protect.
  std::vector<Role> roles(6144, Role::system);
  EXPECT_EQ(kv_sequence_bytes(s, KvPolicy::parse("protect"), roles), 6144 * 12288);
}

}  // namespace
}  // namespace keel::kv
