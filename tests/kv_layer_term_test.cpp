// The layer-aware KV policy term (layers<N=k:F/v:G): its grammar, canonical form and errors; what
// it stores per layer; that the footprint arithmetic, the planner and the pool count the same bytes
// for it, in the formats it names; and that it changes exactly the rows it names.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "keel/arch/model_loader.h"
#include "keel/arch/transformer.h"
#include "keel/kv/kv_block_layout.h"
#include "keel/kv/kv_footprint.h"
#include "keel/kv/kv_policy.h"
#include "keel/kv/kv_pool.h"
#include "keel/model/weights.h"
#include "keel/plan/attention_layout.h"
#include "keel/plan/kv_bytes.h"
#include "keel/util/error.h"
#include "kv_reuse_support.h"
#include "test_support.h"

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

TEST(KvLayerTerm, ParsesKeysValuesOrBoth) {
  const KvPolicy k = KvPolicy::parse("layers<2=k:bf16 default=int4");
  EXPECT_EQ(k.layer_split(), 2);
  EXPECT_EQ(k.layer_key_floor(), KvFormat::BF16);
  EXPECT_EQ(k.layer_value_floor(), KvFormat::Int2);  // not named: no floor
  EXPECT_EQ(k.describe(), "layers<2=k:bf16 sink=0 recent=0 default=int4");

  const KvPolicy kv = KvPolicy::parse("default=int4,layers<3=v:int8/k:bf16");
  EXPECT_EQ(kv.layer_split(), 3);
  EXPECT_EQ(kv.layer_key_floor(), KvFormat::BF16);
  EXPECT_EQ(kv.layer_value_floor(), KvFormat::Int8);
  EXPECT_EQ(kv.describe(), "layers<3=k:bf16/v:int8 sink=0 recent=0 default=int4");

  const KvPolicy both = KvPolicy::parse("layers<1=int8 default=int2");
  EXPECT_EQ(both.layer_key_floor(), KvFormat::Int8);
  EXPECT_EQ(both.layer_value_floor(), KvFormat::Int8);
  EXPECT_EQ(both.describe(), "layers<1=int8 sink=0 recent=0 default=int2");
  EXPECT_EQ(KvPolicy::parse("layers<1=k:int8/v:int8 default=int2"), both);

  const KvPolicy v = KvPolicy::parse("layers<4=v:int8 default=int4");
  EXPECT_EQ(v.describe(), "layers<4=v:int8 sink=0 recent=0 default=int4");

  // Composes with role terms, sinks and the recent window; any order, one canonical form.
  const KvPolicy p = KvPolicy::parse("recent=64 layers<2=k:bf16 tools=bf16 user=int8 sink=4 default=int4");
  EXPECT_EQ(p.describe(), "tools=bf16 user=int8 layers<2=k:bf16 sink=4 recent=64 default=int4");
  EXPECT_EQ(p.role_format(Role::user), KvFormat::Int8);
  for (const KvPolicy& x : {k, kv, both, v, p, KvPolicy::parse("protect-k")})
    EXPECT_EQ(KvPolicy::parse(x.describe()), x) << x.describe();
  // A floor at the least precise format raises nothing: the same policy as no term at all.
  EXPECT_EQ(KvPolicy::parse("layers<2=int2 default=int4"), KvPolicy::parse("default=int4"));
  EXPECT_NE(k, KvPolicy::parse("default=int4"));
  EXPECT_NE(k, KvPolicy::parse("layers<3=k:bf16 default=int4"));
}

TEST(KvLayerTerm, ErrorsNameTheBadWord) {
  EXPECT_NE(error_of("layers<0=k:bf16").find("'layers<0=k:bf16'"), std::string::npos);
  EXPECT_NE(error_of("layers<0=k:bf16").find("positive"), std::string::npos);
  EXPECT_NE(error_of("layers<two=k:bf16").find("'layers<two=k:bf16'"), std::string::npos);
  EXPECT_NE(error_of("layers<-1=k:bf16").find("'layers<-1=k:bf16'"), std::string::npos);
  EXPECT_NE(error_of("layers<2=q:bf16").find("'q:bf16'"), std::string::npos);
  EXPECT_NE(error_of("layers<2=k:int5").find("unknown format 'int5'"), std::string::npos);
  EXPECT_NE(error_of("layers<2=k:int5").find("int2"), std::string::npos);  // lists the valid formats
  EXPECT_NE(error_of("layers<2=int5").find("'int5'"), std::string::npos);
  EXPECT_NE(error_of("layers<2=k:bf16/k:int8").find("'k' is given twice"), std::string::npos);
  EXPECT_NE(error_of("layers<2=k:bf16 layers<3=v:int8").find("'layers<' is given twice"), std::string::npos);
  EXPECT_NE(error_of("layer<2=k:bf16").find("unknown key 'layer<2'"), std::string::npos);
}

TEST(KvLayerTerm, RaisesTheNamedRowsOfEarlyLayersOnly) {
  const KvPolicy p = KvPolicy::parse("layers<2=k:bf16/v:int8 tool_call=int8 default=int4");
  EXPECT_EQ(p.row_forms(0, KvFormat::Int4), (KvRowForms{KvFormat::BF16, KvFormat::Int8}));
  EXPECT_EQ(p.row_forms(1, KvFormat::Int4), (KvRowForms{KvFormat::BF16, KvFormat::Int8}));
  EXPECT_EQ(p.row_forms(2, KvFormat::Int4), (KvRowForms{KvFormat::Int4, KvFormat::Int4}));
  EXPECT_EQ(p.row_forms(0, KvFormat::BF16), (KvRowForms{KvFormat::BF16, KvFormat::BF16}));  // never lowers
  EXPECT_EQ(p.row_forms(0, KvFormat::Int8), (KvRowForms{KvFormat::BF16, KvFormat::Int8}));
  EXPECT_FALSE(p.row_forms(0, KvFormat::BF16).quantized());
  EXPECT_TRUE(p.row_forms(0, KvFormat::Int4).quantized());
  // Block formats are still the roles' (the term acts per layer, below the block's format).
  std::vector<Role> roles(kKvBlockTokens, Role::user);
  EXPECT_EQ(p.block_format(roles, 32), KvFormat::Int4);

  const KvPolicy pk = KvPolicy::preset(KvPreset::ProtectKeys);
  EXPECT_EQ(pk, KvPolicy::parse("protect-k"));
  EXPECT_EQ(pk.describe(), "system=bf16 tools=bf16 tool_call=int8 layers<" + std::to_string(kProtectKeysLayers) +
                               "=k:bf16 sink=4 recent=256 default=int4");
  // Apart from the layer term it is protect.
  EXPECT_EQ(KvPolicy::parse("system=bf16 tools=bf16 tool_call=int8 sink=4 recent=256 default=int4"),
            KvPolicy::parse("protect"));
  EXPECT_EQ(pk.row_forms(0, KvFormat::Int4), (KvRowForms{KvFormat::BF16, KvFormat::Int4}));
  EXPECT_EQ(pk.row_forms(kProtectKeysLayers, KvFormat::Int4), (KvRowForms{KvFormat::Int4, KvFormat::Int4}));
}

// tiny-toolcaller: 4 layers, 2 KV heads of 64. A user token out of every window costs per layer
// and head 40 + 40 bytes (int4 K and V), 128 + 40 where the term keeps K at bf16.
TEST(KvLayerTerm, BytesPerTokenCountTheRaisedRows) {
  const ModelWeights w = arch::load_model(test::shared_dir() / "models" / "tiny-toolcaller");
  const ModelSpec& spec = w.spec;
  ASSERT_EQ(spec.num_layers, 4);
  const int64_t n = 16 * 1000;  // whole blocks; recent=0: every block but none is quantized
  const std::vector<Role> roles(static_cast<size_t>(n), Role::user);
  auto per_token = [&](const char* spec_text) {
    return static_cast<double>(kv_sequence_bytes(spec, KvPolicy::parse(spec_text), roles)) / static_cast<double>(n);
  };
  EXPECT_EQ(per_token("default=int4"), 4 * 2 * (40 + 40));
  EXPECT_EQ(per_token("layers<1=k:bf16 default=int4"), 1 * 2 * (128 + 40) + 3 * 2 * (40 + 40));
  EXPECT_EQ(per_token("layers<2=k:bf16 default=int4"), 2 * 2 * (128 + 40) + 2 * 2 * (40 + 40));
  EXPECT_EQ(per_token("layers<2=k:bf16/v:int8 default=int4"), 2 * 2 * (128 + 68) + 2 * 2 * (40 + 40));
  EXPECT_EQ(per_token("layers<3=v:int8 default=int4"), 3 * 2 * (40 + 68) + 1 * 2 * (40 + 40));
  EXPECT_EQ(per_token("layers<4=bf16 default=int4"), 4 * 2 * (128 + 128));  // everything bf16, one form
  EXPECT_EQ(per_token("layers<9=k:bf16 default=int4"), 4 * 2 * (128 + 40));  // N beyond the model: every layer
  // A term whose floor is below the roles' formats changes nothing.
  EXPECT_EQ(per_token("layers<2=k:int4 default=int8"), per_token("default=int8"));

  // The planner (config-read layer groups) counts what the pool's arithmetic counts, for every
  // preset and for contexts around block and window boundaries.
  const plan::AttentionLayout layout = plan::read_attention_layout(spec);
  for (KvPreset preset : kPresetsByPrecision)
    for (int64_t ctx : {int64_t{1}, int64_t{300}, int64_t{4097}, int64_t{32768}}) {
      SCOPED_TRACE(std::string(kv_preset_name(preset)) + " at " + std::to_string(ctx));
      EXPECT_EQ(plan::kv_bytes_for_context(layout, preset, ctx),
                static_cast<uint64_t>(kv_context_bytes(spec, KvPolicy::preset(preset), ctx)));
    }
  // protect-k at 32k user tokens: protect's int4 bulk plus layer 0's keys at bf16.
  const double protect = kv_bytes_per_token(spec, KvPolicy::preset(KvPreset::Protect), 32768);
  const double protect_k = kv_bytes_per_token(spec, KvPolicy::preset(KvPreset::ProtectKeys), 32768);
  EXPECT_GT(protect_k, protect + 0.9 * kProtectKeysLayers * 2 * (128 - 40));
  EXPECT_LT(protect_k, protect + 1.1 * kProtectKeysLayers * 2 * (128 - 40));

  // Groups without layer indices cannot be split by a layer term.
  const std::vector<KvGroupShape> anonymous = {{4, {{4, 64, true}}, 0}};
  EXPECT_THROW(kv_context_bytes(anonymous, KvPolicy::parse("layers<2=k:bf16 default=int4"), 100), Error);
  EXPECT_NO_THROW(kv_context_bytes(anonymous, KvPolicy::parse("default=int4"), 100));
}

TEST(KvLayerTerm, LayoutSplitsGroupsAtTheTerm) {
  const ModelWeights w = arch::load_model(test::shared_dir() / "models" / "tiny-toolcaller");
  const KvBlockLayout plain(w.spec);
  EXPECT_EQ(plain.group_count(), 1);
  const KvBlockLayout split(w.spec, KvPolicy::parse("layers<1=k:bf16 default=int4"));
  ASSERT_EQ(split.group_count(), 2);
  EXPECT_EQ(split.group(0).layers, std::vector<int64_t>({0}));
  EXPECT_EQ(split.group(1).layers, std::vector<int64_t>({1, 2, 3}));
  EXPECT_EQ(split.forms(0, KvFormat::Int4), (KvRowForms{KvFormat::BF16, KvFormat::Int4}));
  EXPECT_EQ(split.forms(1, KvFormat::Int4), (KvRowForms{KvFormat::Int4, KvFormat::Int4}));
  // Group 0's rows of one int4 block: 1 layer x 2 heads x 16 tokens x (128 K + 40 V).
  EXPECT_EQ(split.group_bytes(0, KvFormat::Int4), 1u * 2 * 16 * (128 + 40));
  EXPECT_EQ(split.group_key_bytes(0, KvFormat::Int4), 1u * 2 * 16 * 128);
  EXPECT_EQ(split.values_offset(KvFormat::Int4, 0, 1) - split.keys_offset(KvFormat::Int4, 0, 1), 16u * 128);
  EXPECT_EQ(split.keys_offset(KvFormat::Int4, 0, 1), 16u * (128 + 40));
  // Full precision is bf16 everywhere, laid out as without the term.
  EXPECT_EQ(split.block_bytes(KvFormat::BF16), plain.block_bytes(KvFormat::BF16));
}

using reuse::Conversation;
using reuse::kBudget;
using reuse::Model;
using reuse::random_conversation;
using reuse::run_rest;
using reuse::same_bits;

std::vector<float> logits_under(Model& m, const KvPolicy& policy, const Conversation& c, int64_t chunk,
                                KvPoolStats* stats = nullptr) {
  KvPool pool(m.weights.spec, kBudget, policy, true);
  auto seq = pool.open(c.ids, c.roles);
  std::vector<float> logits = run_rest(m.model, *seq, c, chunk);
  if (stats != nullptr) *stats = pool.stats();
  return logits;
}

// The pool holds what the footprint says, K and V in the formats the term names, and quantizes
// each (block, layer) once, on full-attention and sliding-window models.
TEST(KvLayerTerm, PoolStoresAndCountsWhatThePolicySays) {
  for (const char* name : {"tiny-toolcaller", "tiny-gemma3-random", "tiny-gptoss-random"}) {
    Model m(name);
    std::mt19937 rng(5);
    const Conversation c = random_conversation(rng, 220, m.weights.spec.vocab_size);
    for (const char* spec : {"layers<1=k:bf16 default=int4 recent=32", "layers<2=k:bf16/v:int8 default=int2 sink=4",
                             "layers<2=bf16 default=int4", "system=bf16 tool_call=int8 layers<3=v:int8 recent=48 default=int4"}) {
      SCOPED_TRACE(std::string(name) + " / " + spec);
      const KvPolicy policy = KvPolicy::parse(spec);
      KvPoolStats s;
      logits_under(m, policy, c, 48, &s);
      EXPECT_EQ(s.used_bytes, kv_sequence_bytes(m.weights.spec, policy, c.roles));
      EXPECT_EQ(s.bytes(KvFormat::BF16) + s.bytes(KvFormat::Int8) + s.bytes(KvFormat::Int4) + s.bytes(KvFormat::Int2),
                s.used_bytes);
      EXPECT_GT(s.quantizations, 0);
      EXPECT_EQ(s.requantizations, 0);
    }
  }
  // tiny-toolcaller, every block out of the window (recent=0), only user tokens: K rows of every
  // layer at bf16, V rows at int4, and nothing at int4 for the keys.
  Model m("tiny-toolcaller");
  Conversation c;
  std::mt19937 rng(6);
  c = random_conversation(rng, 160, m.weights.spec.vocab_size);
  std::fill(c.roles.begin(), c.roles.end(), Role::user);
  KvPoolStats s;
  logits_under(m, KvPolicy::parse("layers<4=k:bf16 default=int4"), c, 160, &s);
  // 10 complete blocks: 4 layers x 2 heads x 16 tokens of K at bf16 (128) and of V at int4 (40).
  EXPECT_EQ(s.bytes(KvFormat::Int4), 10 * 4 * 2 * 16 * 40);
  EXPECT_EQ(s.bytes(KvFormat::BF16), 10 * 4 * 2 * 16 * 128);
  EXPECT_EQ(s.quantizations, 10 * 4);
}

TEST(KvLayerTerm, ChangesExactlyTheRowsItNames) {
  Model m("tiny-toolcaller");
  std::mt19937 rng(7);
  const Conversation c = random_conversation(rng, 200, m.weights.spec.vocab_size);
  const std::vector<float> full = logits_under(m, KvPolicy(), c, 64);
  const std::vector<float> int4 = logits_under(m, KvPolicy::parse("default=int4"), c, 64);
  // Every layer's K and V raised to bf16: the int4 policy stores exactly what full stores.
  EXPECT_TRUE(same_bits(logits_under(m, KvPolicy::parse("layers<4=bf16 default=int4"), c, 64), full));
  // Keys of layer 0 only, or of every layer: neither full nor int4.
  for (const char* spec : {"layers<1=k:bf16 default=int4", "layers<4=k:bf16 default=int4", "layers<4=v:bf16 default=int4"}) {
    const std::vector<float> raised = logits_under(m, KvPolicy::parse(spec), c, 64);
    EXPECT_FALSE(same_bits(raised, full)) << spec;
    EXPECT_FALSE(same_bits(raised, int4)) << spec;
  }
  // Chunked prefill equals one-shot under the term, rotated or not.
  for (const char* spec : {"layers<1=k:bf16 default=int4 recent=32", "protect-k"}) {
    const KvPolicy policy = KvPolicy::parse(spec).with_recent(32);
    const std::vector<float> one = logits_under(m, policy, c, 200);
    for (int64_t chunk : {int64_t{64}, int64_t{7}, int64_t{1}}) EXPECT_TRUE(same_bits(logits_under(m, policy, c, chunk), one)) << spec << " " << chunk;
  }
}

}  // namespace
}  // namespace keel::kv
