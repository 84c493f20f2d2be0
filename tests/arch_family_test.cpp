// The model description and the architecture registry: what the generic config reading and each
// family make of real config.json files, and what the engine refuses, by config key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "keel/arch/family.h"
#include "keel/arch/model_loader.h"
#include "keel/arch/synth.h"
#include "keel/model/config_view.h"
#include "keel/ops/elementwise.h"
#include "keel/util/error.h"
#include "test_support.h"

namespace {

using namespace keel;

ConfigView model_config(const std::string& name) {
  return ConfigView::load(test::shared_dir() / "models" / name / "config.json");
}
ConfigView fixture_config(const std::string& name) {
  return ConfigView::load(test::shared_dir() / "fixtures/configs" / name / "config.json");
}

std::string refusal(const ConfigView& config) {
  try {
    arch::runnable_spec(config);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ArchFamily, RegistryFindsEachFamilyByModelType) {
  for (const char* type : {"llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "qwen3_next", "gpt_oss", "gemma3_text", "gemma4_text"}) {
    const arch::Family* f = arch::find_family(type);
    ASSERT_NE(f, nullptr) << type;
    EXPECT_EQ(f->model_type, type);
  }
  EXPECT_EQ(arch::find_family("gpt2"), nullptr);
  EXPECT_EQ(arch::family_list(), "gemma3_text, gemma4_text, gpt_oss, llama, mistral, qwen2, qwen3, qwen3_moe, qwen3_next");
}

TEST(ArchFamily, DenseQwenLayersFollowTheirFamily) {
  const ModelSpec qwen2 = arch::runnable_spec(model_config("tiny-toolcaller"));
  ASSERT_EQ(qwen2.layers.size(), static_cast<size_t>(qwen2.num_layers));
  for (const LayerSpec& l : qwen2.layers) {
    EXPECT_EQ(l.attention, AttentionKind::Full);
    EXPECT_TRUE(l.qkv_bias);  // Qwen2 always has q/k/v bias, though config.json does not say so
    EXPECT_FALSE(l.o_bias);
    EXPECT_FALSE(l.qk_norm);
    EXPECT_DOUBLE_EQ(l.attention_scale, 1.0 / std::sqrt(static_cast<double>(l.head_dim)));
  }
  const ModelSpec qwen3 = arch::runnable_spec(model_config("tiny-qwen3-random"));
  for (const LayerSpec& l : qwen3.layers) {
    EXPECT_TRUE(l.qk_norm);
    EXPECT_FALSE(l.qkv_bias);
  }
}

TEST(ArchFamily, Gemma3TextSpec) {
  const ModelSpec s = arch::runnable_spec(model_config("tiny-gemma3-random"));
  EXPECT_EQ(s.norm, NormKind::RmsUnitOffset);
  EXPECT_DOUBLE_EQ(s.embedding_scale, std::sqrt(64.0));
  ASSERT_EQ(s.layers.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    const LayerSpec& l = s.layers[i];
    EXPECT_TRUE(l.sandwich_norms && l.qk_norm);
    EXPECT_EQ(l.activation, Activation::GeluTanh);
    EXPECT_DOUBLE_EQ(l.attention_scale, 1.0 / std::sqrt(16.0));  // query_pre_attn_scalar, not head_dim 32
    if (i < 5) {
      EXPECT_EQ(l.attention, AttentionKind::Sliding);
      EXPECT_EQ(l.window, 8);
      EXPECT_EQ(l.rope.theta, 10000.0);  // rope_local_base_freq, unscaled
      EXPECT_EQ(l.rope.scaling.kind, RopeScaling::Kind::None);
    } else {
      EXPECT_EQ(l.attention, AttentionKind::Full);
      EXPECT_EQ(l.rope.theta, 1000000.0);
      EXPECT_EQ(l.rope.scaling.kind, RopeScaling::Kind::Linear);
      EXPECT_EQ(l.rope.scaling.factor, 8.0);
    }
  }
}

TEST(ArchFamily, NestedTextConfigIsRead) {
  // medgemma-27b is a multimodal Gemma 3 folder: the language model lives under text_config.
  const ModelSpec s = arch::describe_spec(fixture_config("medgemma-27b-it-gemma3"));
  EXPECT_EQ(s.model_type, "gemma3_text");
  EXPECT_EQ(s.norm, NormKind::RmsUnitOffset);  // refined by the gemma3_text family
  // Neither config level names tie_word_embeddings and the index lists no lm_head: transformers'
  // Gemma 3 default ties them, and so must keel, or the folder would not load.
  EXPECT_TRUE(s.tie_word_embeddings);
  EXPECT_GT(s.num_layers, 0);
  int64_t sliding = 0;
  for (const LayerSpec& l : s.layers) sliding += l.attention == AttentionKind::Sliding;
  EXPECT_GT(sliding, 0);
}

TEST(ArchFamily, UnsupportedFeaturesAreRefusedByConfigKey) {
  // Known family, unsupported feature: the message names the key.
  ConfigView moe(nlohmann::json::parse(test::read_text(test::shared_dir() / "models/tiny-qwen3-random/config.json")),
                 "config.json");
  nlohmann::json j = moe.root();
  j["model_type"] = "mamba";
  EXPECT_NE(refusal(ConfigView(j, "config.json")).find("model_type 'mamba' is not supported"), std::string::npos);
  j = moe.root();
  j["full_attention_interval"] = 2;  // linear layers in a family without them
  j["linear_num_value_heads"] = 4, j["linear_num_key_heads"] = 2, j["linear_key_head_dim"] = 16;
  j["linear_value_head_dim"] = 16, j["linear_conv_kernel_dim"] = 4;
  EXPECT_NE(refusal(ConfigView(j, "config.json")).find("key 'full_attention_interval': linear attention in qwen3 is not supported yet"),
            std::string::npos);
  j = moe.root();
  j["num_experts"] = 8;
  j["num_experts_per_tok"] = 2;
  EXPECT_NE(refusal(ConfigView(j, "config.json")).find("key 'num_experts': a mixture-of-experts FFN in qwen3 is not supported yet"),
            std::string::npos);
  j = moe.root();
  j["rope_scaling"] = {{"rope_type", "longrope"}, {"factor", 4.0}};
  EXPECT_NE(refusal(ConfigView(j, "config.json")).find("rope_scaling type 'longrope' is not supported"), std::string::npos);
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 40.0}, {"mscale", 1.0}, {"mscale_all_dim", 1.0}};
  EXPECT_NE(refusal(ConfigView(j, "config.json")).find("rope_scaling type 'yarn with mscale' is not supported"),
            std::string::npos);
  j = moe.root();
  j["kv_lora_rank"] = 512;
  j["qk_rope_head_dim"] = 64;
  EXPECT_NE(refusal(ConfigView(j, "config.json")).find("key 'kv_lora_rank'"), std::string::npos);
}

TEST(ArchFamily, Qwen3MoeLayersAndMlxOverrides) {
  const ModelSpec s = arch::runnable_spec(model_config("tiny-qwen3moe-random"));
  ASSERT_EQ(s.layers.size(), 3u);
  for (size_t i : {0u, 2u}) {
    ASSERT_TRUE(s.layers[i].moe.has_value()) << i;
    EXPECT_EQ(s.layers[i].moe->experts, 8);
    EXPECT_EQ(s.layers[i].moe->experts_per_token, 2);
    EXPECT_EQ(s.layers[i].moe->expert_ffn_dim, 128);
    EXPECT_TRUE(s.layers[i].moe->norm_topk_prob);
    EXPECT_TRUE(s.layers[i].qk_norm);
  }
  EXPECT_FALSE(s.layers[1].moe.has_value());  // mlp_only_layers: [1]
  EXPECT_EQ(s.layers[1].ffn_dim, 192);

  const ModelSpec mlx = arch::runnable_spec(model_config("tiny-qwen3moe-random-mlx4"));
  ASSERT_TRUE(mlx.quantization.has_value());
  EXPECT_EQ(mlx.quantization->bits, 4);
  ASSERT_EQ(mlx.quantization_overrides.count("model.layers.0.mlp.gate"), 1u);
  EXPECT_EQ(mlx.quantization_overrides.at("model.layers.0.mlp.gate").bits, 8);  // the router stays at 8 bits
}

// keel synth writes the experts under the names the loader reads; a decode step streams only the
// experts a token is routed to.
TEST(ArchFamily, SynthesizedMoeLoadsAndCountsActiveBytes) {
  test::TempDir dir;
  const auto config = test::shared_dir() / "models/tiny-qwen3moe-random/config.json";
  for (WeightFormat format : {WeightFormat::BF16, WeightFormat::MLX4}) {
    const auto out = dir.path() / weight_format_name(format);
    SynthOptions o;
    o.format = format;
    synthesize_model(config, out, o);
    const ModelWeights w = arch::load_model(out);
    ASSERT_EQ(w.layers.size(), 3u);
    ASSERT_EQ(w.layers[0].experts.size(), 8u);
    EXPECT_TRUE(w.layers[1].experts.empty());  // the dense layer
    EXPECT_EQ(w.layers[0].experts[7].down.format, format);
    size_t all_experts = 0, one_expert = 0;
    for (const auto& e : w.layers[0].experts) all_experts += e.gate.stored_bytes() + e.up.stored_bytes() + e.down.stored_bytes();
    one_expert = all_experts / 8;
    // The untied head whole, and the one embedding row of the token.
    size_t dense_total = w.output().stored_bytes() + w.embed.stored_bytes() / static_cast<size_t>(w.spec.vocab_size);
    for (const auto& l : w.layers)
      for (const Matrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down, &l.router}) dense_total += m->stored_bytes();
    const DecodeWeightBytes bytes = w.decode_bytes();
    EXPECT_EQ(bytes.active, dense_total + 2 * 2 * one_expert);  // 2 MoE layers, top-2 of 8
    EXPECT_EQ(bytes.resident, dense_total - w.embed.stored_bytes() / static_cast<size_t>(w.spec.vocab_size) +
                                  w.embed.stored_bytes() + 2 * 8 * one_expert);
  }
}

// gpt-oss-20b's real config: alternating sliding (128) and full layers, sinks, YaRN without
// truncation, 32 experts of which 4 per token, weighted by a softmax over the chosen four.
TEST(ArchFamily, GptOssFromTheRealConfig) {
  const ModelSpec s = arch::runnable_spec(fixture_config("gpt-oss-20b"));
  ASSERT_EQ(s.layers.size(), 24u);
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const LayerSpec& l = s.layers[i];
    EXPECT_EQ(l.attention, i % 2 == 0 ? AttentionKind::Sliding : AttentionKind::Full) << i;
    EXPECT_EQ(l.window, i % 2 == 0 ? 128 : 0) << i;
    EXPECT_TRUE(l.attention_sinks && l.qkv_bias && l.o_bias);
    EXPECT_FALSE(l.qk_norm);
    ASSERT_TRUE(l.moe.has_value());
    EXPECT_EQ(l.moe->experts, 32);
    EXPECT_EQ(l.moe->experts_per_token, 4);
    EXPECT_EQ(l.moe->expert_ffn_dim, 2880);
    EXPECT_TRUE(l.moe->softmax_after_topk && l.moe->biases);
    EXPECT_EQ(l.moe->swiglu_limit, 7.0);
    const RopeScaling& y = l.rope.scaling;
    EXPECT_EQ(y.kind, RopeScaling::Kind::Yarn);
    EXPECT_EQ(y.factor, 32.0);
    EXPECT_EQ(y.original_max_position, 4096);
    EXPECT_FALSE(y.truncate);
    EXPECT_NEAR(y.attention_factor, 0.1 * std::log(32.0) + 1.0, 1e-12);
  }
  EXPECT_FALSE(s.tie_word_embeddings);
}

// YaRN keeps the fastest-turning dimensions, divides the slowest by the factor, and ramps between;
// with truncate false the ramp bounds stay fractional.
TEST(ArchFamily, YarnFrequenciesFollowTheRamp) {
  RopeSpec spec{150000.0, {}};
  spec.scaling.kind = RopeScaling::Kind::Yarn;
  spec.scaling.factor = 32.0;
  spec.scaling.original_max_position = 4096;
  spec.scaling.truncate = false;
  const int64_t head_dim = 64;
  const ops::Rope yarn(spec, head_dim), plain(RopeSpec{150000.0, {}}, head_dim);
  const double d = head_dim;
  auto bound = [&](double rotations) { return d * std::log(4096.0 / (rotations * 2 * std::numbers::pi)) / (2 * std::log(150000.0)); };
  const double low = bound(32.0), high = bound(1.0);
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const double f = plain.inv_freq()[static_cast<size_t>(i)];
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    EXPECT_NEAR(yarn.inv_freq()[static_cast<size_t>(i)], f * (1 - ramp) + f / 32.0 * ramp, 1e-12 * f) << i;
  }
  EXPECT_EQ(yarn.inv_freq().front(), plain.inv_freq().front());              // kept
  EXPECT_NEAR(yarn.inv_freq().back(), plain.inv_freq().back() / 32.0, 1e-18);  // interpolated
  spec.scaling.truncate = true;  // rounded bounds move the middle of the ramp
  const ops::Rope rounded(spec, head_dim);
  EXPECT_NE(rounded.inv_freq()[static_cast<size_t>(std::ceil(low))], yarn.inv_freq()[static_cast<size_t>(std::ceil(low))]);
}

// keel synth writes gpt-oss's experts as MXFP4 blocks and scales, and --layers keeps a prefix of
// the layers (layer_types shrinking with it).
TEST(ArchFamily, SynthesizedGptOssLoadsWithMxfp4Experts) {
  test::TempDir dir;
  SynthOptions o;
  o.layers = 2;
  synthesize_model(test::shared_dir() / "models/tiny-gptoss-random/config.json", dir.path(), o);
  const ModelWeights w = arch::load_model(dir.path());
  ASSERT_EQ(w.layers.size(), 2u);
  EXPECT_EQ(w.spec.layers[0].attention, AttentionKind::Sliding);
  EXPECT_EQ(w.spec.layers[1].attention, AttentionKind::Full);
  const ExpertWeights& e = w.layers[1].experts[7];
  EXPECT_EQ(e.gate_up.format, WeightFormat::MXFP4);
  EXPECT_EQ(e.gate_up.rows, 2 * 96);
  EXPECT_EQ(e.down.format, WeightFormat::MXFP4);
  EXPECT_EQ(e.gate_up.stored_bytes(), static_cast<size_t>(192 * 64 / 2 + 192 * 64 / 32));  // codes + exponents
  EXPECT_EQ(e.down_bias.size(), 64u);
  EXPECT_EQ(w.layers[0].sinks.size(), 4u);
  EXPECT_EQ(w.layers[0].router_bias.size(), 8u);
  EXPECT_THROW(synthesize_model(test::shared_dir() / "models/tiny-gptoss-random/config.json", dir.path() / "x",
                                SynthOptions{.format = WeightFormat::MLX4}),
               Error);
}

TEST(ArchFamily, PlanDescribesWhatServeRefuses) {
  // describe_spec never refuses a feature: keel plan sizes models keel cannot run yet.
  const ModelSpec next = arch::describe_spec(fixture_config("Qwen3-Next-80B-A3B-Thinking"));
  int64_t linear = 0;
  for (const LayerSpec& l : next.layers) linear += l.attention == AttentionKind::Linear;
  EXPECT_GT(linear, 0);
  const ModelSpec moe = arch::describe_spec(fixture_config("Qwen3-30B-A3B"));
  ASSERT_TRUE(moe.layers.front().moe.has_value());
  EXPECT_EQ(moe.layers.front().moe->experts, 128);
  EXPECT_EQ(moe.layers.front().moe->experts_per_token, 8);
}

}  // namespace
