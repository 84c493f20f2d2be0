// KV bytes per token and weight bytes for the real configs in shared/fixtures/configs, each checked
// against arithmetic done by hand from the config's own numbers (written out next to each check).
// KV per token for an attention layer = 2 (K and V) x KV heads x head_dim x bytes per element.
#include <gtest/gtest.h>

#include "keel/arch/model_loader.h"
#include "keel/kv/kv_footprint.h"
#include "keel/kv/kv_policy.h"
#include "keel/model/config_view.h"
#include "keel/plan/attention_layout.h"
#include "keel/plan/kv_bytes.h"
#include "keel/plan/weight_inventory.h"
#include "keel/util/error.h"
#include "test_support.h"

namespace plan = keel::plan;
using keel::KvFormat;

namespace {

std::filesystem::path config_dir(const std::string& name) { return keel::test::shared_dir() / "fixtures/configs" / name; }

struct Loaded {
  keel::ConfigView config;
  plan::AttentionLayout layout;
};

Loaded load(const std::string& name) {
  auto config = keel::ConfigView::load(config_dir(name) / "config.json");
  auto layout = plan::read_attention_layout(config);
  return {std::move(config), std::move(layout)};
}

int64_t growing(const Loaded& m, KvFormat f) { return plan::growing_bytes_per_token(m.layout, f); }

// Layers of one kind, summed over groups.
int64_t layers_of(const Loaded& m, keel::AttentionKind kind) {
  int64_t n = 0;
  for (const auto& g : m.layout.groups) {
    if (g.shape.kind == kind) n += g.layers;
  }
  return n;
}

const plan::LayerGroup& group_of(const Loaded& m, keel::AttentionKind kind) {
  for (const auto& g : m.layout.groups) {
    if (g.shape.kind == kind) return g;
  }
  throw std::runtime_error("no layer group of that kind");
}

std::optional<uint64_t> weight_bytes(const std::string& name) {
  auto config = keel::ConfigView::load(config_dir(name) / "config.json");
  return plan::inventory_weights(config_dir(name), config).bytes;
}

}  // namespace

TEST(PlanRealConfigs, Llama33_70B) {
  auto m = load("Llama-3.3-70B-Instruct");
  EXPECT_EQ(m.layout.num_layers, 80);
  EXPECT_EQ(layers_of(m, keel::AttentionKind::Full), 80);
  // head_dim = hidden 8192 / 64 heads = 128; 8 KV heads.
  EXPECT_EQ(growing(m, KvFormat::BF16), 2 * 80 * 8 * 128 * 2);  // 327,680
  EXPECT_EQ(growing(m, KvFormat::BF16), 327680);
  EXPECT_EQ(growing(m, KvFormat::Int8), 2 * 80 * 8 * (128 + 4 * 2));       // 174,080
  EXPECT_EQ(growing(m, KvFormat::Int4), 2 * 80 * 8 * (64 + 4 * (2 + 2)));  // 102,400
  // 128k tokens at bf16: 327,680 x 131,072 = 40 GiB exactly.
  EXPECT_EQ(plan::kv_bytes_for_context(m.layout, plan::KvPreset::Full, 131072), 40ull << 30);
  // The folder holds only config.json: no weight bytes, and none invented from a parameter count.
  EXPECT_FALSE(weight_bytes("Llama-3.3-70B-Instruct").has_value());
}

TEST(PlanRealConfigs, Qwen25_7B_and_32B_IgnoreTheDisabledSlidingWindow) {
  // Both configs say sliding_window 131072 but use_sliding_window false: every layer is full.
  auto m7 = load("Qwen2.5-7B");
  EXPECT_EQ(layers_of(m7, keel::AttentionKind::Full), 28);
  // head_dim = 3584 / 28 = 128; 4 KV heads; 28 layers.
  EXPECT_EQ(growing(m7, KvFormat::BF16), 2 * 28 * 4 * 128 * 2);  // 57,344
  EXPECT_EQ(growing(m7, KvFormat::BF16), 57344);

  auto m32 = load("Qwen2.5-32B");
  // head_dim = 5120 / 40 = 128; 8 KV heads; 64 layers.
  EXPECT_EQ(growing(m32, KvFormat::BF16), 2 * 64 * 8 * 128 * 2);  // 262,144
  EXPECT_EQ(growing(m32, KvFormat::BF16), 262144);
  EXPECT_EQ(growing(m32, KvFormat::Int8), 2 * 64 * 8 * 136);  // 139,264
}

TEST(PlanRealConfigs, Qwen3_8B_and_32B) {
  // Explicit head_dim 128; 8 KV heads.
  EXPECT_EQ(growing(load("Qwen3-8B"), KvFormat::BF16), 2 * 36 * 8 * 128 * 2);   // 147,456
  EXPECT_EQ(growing(load("Qwen3-32B"), KvFormat::BF16), 2 * 64 * 8 * 128 * 2);  // 262,144
  EXPECT_EQ(growing(load("Qwen3-32B"), KvFormat::Int4), 2 * 64 * 8 * 80);       // 81,920
}

TEST(PlanRealConfigs, Qwen3_30B_A3B_MoeCountsAttentionOnly) {
  // Experts change the weights, not the KV: 48 layers, 4 KV heads of 128.
  auto m = load("Qwen3-30B-A3B");
  EXPECT_EQ(growing(m, KvFormat::BF16), 2 * 48 * 4 * 128 * 2);  // 98,304
  EXPECT_EQ(growing(m, KvFormat::BF16), 98304);
}

TEST(PlanRealConfigs, Qwen3Next_HybridCountsOnlyTheFullAttentionLayers) {
  auto m = load("Qwen3-Next-80B-A3B-Thinking");
  // full_attention_interval 4: layers 3, 7, ..., 47 are full attention (12), the other 36 linear.
  EXPECT_EQ(layers_of(m, keel::AttentionKind::Full), 12);
  EXPECT_EQ(layers_of(m, keel::AttentionKind::Linear), 36);
  // 12 layers x 2 KV heads x head_dim 256 (not 48 layers: that would be 4x too much).
  EXPECT_EQ(growing(m, KvFormat::BF16), 2 * 12 * 2 * 256 * 2);  // 24,576
  EXPECT_EQ(growing(m, KvFormat::BF16), 24576);
  // Linear layers: a snapshot of the f32 state per layer is
  //   32 value heads x 128 (key dim) x 128 (value dim)                 = 524,288
  //   + conv (kernel 4 - 1) x (2 x 16 key heads x 128 + 32 x 128)      =  24,576
  //   = 548,864 elements x 4 bytes = 2,195,456 bytes, x 36 layers     = 79,036,416;
  // live, a sequence also holds its current tile (16 tokens): conv inputs 16 x 8,192 and per value
  // head 16 keys, 16 corrected values and 16 decays (16 x 257 x 32 = 131,584):
  //   548,864 + 131,072 + 131,584 = 811,520 elements = 3,246,080 bytes, x 36 = 116,858,880.
  const uint64_t snapshot = 79036416u, live = 116858880u;
  EXPECT_EQ(group_of(m, keel::AttentionKind::Linear).shape.snapshot_bytes, (524288 + 3 * 8192) * 4);
  EXPECT_EQ(group_of(m, keel::AttentionKind::Linear).shape.fixed_state_bytes, 811520 * 4);
  EXPECT_EQ(plan::fixed_state_bytes(m.layout), live);
  // The state does not grow with the context and does not depend on the policy; a sequence keeps
  // at most its latest snapshot, its branch point, its preamble's end and one per 128 blocks. The
  // KV pool stores whole blocks of 16 tokens: 1,000 tokens take 63 blocks, 1,008 tokens' worth.
  EXPECT_EQ(plan::kv_bytes_for_context(m.layout, plan::KvPreset::Full, 1000), live + 3 * snapshot + 24576u * 1008);
  EXPECT_EQ(plan::kv_bytes_for_context(m.layout, plan::KvPreset::Int8, 0), live);
  EXPECT_EQ(plan::kv_bytes_for_context(m.layout, plan::KvPreset::Full, 4096),
            live + (3 + 2) * snapshot + 24576u * 4096);  // 256 blocks: two interval snapshots
}

TEST(PlanRealConfigs, DeepSeekV3_MlaCachesTheLatentOnce) {
  for (const char* name : {"DeepSeek-V3", "DeepSeek-R1"}) {
    auto m = load(name);
    EXPECT_EQ(layers_of(m, keel::AttentionKind::Mla), 61) << name;
    // kv_lora_rank 512 + qk_rope_head_dim 64, one copy per token (no factor 2, no 128 heads).
    EXPECT_EQ(growing(m, KvFormat::BF16), 61 * (512 + 64) * 2) << name;  // 70,272
    EXPECT_EQ(growing(m, KvFormat::BF16), 70272);
    // int8: 512 + 16 scales x 2, 64 + 2 x 2 -> 61 x 612 = 37,332
    EXPECT_EQ(growing(m, KvFormat::Int8), 61 * ((512 + 16 * 2) + (64 + 2 * 2)));
    // int4: 256 + 16 x 4, 32 + 2 x 4 -> 61 x 360 = 21,960
    EXPECT_EQ(growing(m, KvFormat::Int4), 61 * ((256 + 16 * 4) + (32 + 2 * 4)));
  }
  // Kimi K2 is the same MLA shape.
  EXPECT_EQ(growing(load("Kimi-K2-Instruct"), KvFormat::BF16), 61 * 576 * 2);
}

TEST(PlanRealConfigs, DeepSeekV32_AddsTheIndexerKey) {
  // The sparse-attention indexer caches one 128-wide key per token per layer.
  EXPECT_EQ(growing(load("DeepSeek-V3.2"), KvFormat::BF16), 61 * (512 + 64 + 128) * 2);  // 85,888
}

TEST(PlanRealConfigs, GptOss20b_SlidingLayersStopAtTheirWindow) {
  auto m = load("gpt-oss-20b");
  EXPECT_EQ(layers_of(m, keel::AttentionKind::Full), 12);
  EXPECT_EQ(layers_of(m, keel::AttentionKind::Sliding), 12);
  const auto& sliding = group_of(m, keel::AttentionKind::Sliding);
  EXPECT_EQ(sliding.shape.window, 128);
  // head_dim 64, 8 KV heads; 12 full layers grow with the context:
  EXPECT_EQ(growing(m, KvFormat::BF16), 2 * 12 * 8 * 64 * 2);  // 24,576
  // 12 sliding layers cost the same per token but hold only the blocks their 128-token window
  // reaches, one more for the next turn and the partly filled ones at both ends: at most 10 blocks,
  // 160 tokens (at 131,057 tokens: blocks 8182-8191): 24,576 x 160 = 3,932,160.
  EXPECT_EQ(plan::group_bytes_per_token(sliding, KvFormat::BF16), 24576);
  EXPECT_EQ(plan::kv_bytes_for_context(m.layout, plan::KvPreset::Full, 131072),
            24576ull * 131072 + 24576ull * 160);  // 3,225,157,632
  // 100 tokens: 7 blocks in every layer.
  EXPECT_EQ(plan::kv_bytes_for_context(m.layout, plan::KvPreset::Full, 100), 24576ull * 112 * 2);
  // Weights: the index's declared total_size (no shards in the fixture folder). By hand, per layer:
  //   experts (32): gate_up mxfp4 blocks 5760 x 2880 / 2 bytes + a u8 scale per 32 + bf16 bias 5760,
  //                 down    mxfp4 blocks 2880 x 2880 / 2 bytes + a u8 scale per 32 + bf16 bias 2880
  //   router 32 x 2880 bf16 + 32 bias; attention bf16: q and o 4096 x 2880, k and v 512 x 2880,
  //   biases 4096 + 512 + 512 + 2880, 64 sinks; two norms of 2880.
  // Plus bf16 embed and lm_head 201088 x 2880 each and a final norm.
  constexpr uint64_t experts = 32ull * (5760 * 2880 / 2 + 5760 * 2880 / 32 + 5760 * 2 + 2880 * 2880 / 2 +
                                        2880 * 2880 / 32 + 2880 * 2);
  constexpr uint64_t router = (32ull * 2880 + 32) * 2;
  constexpr uint64_t attention = (2ull * 4096 * 2880 + 2ull * 512 * 2880 + 4096 + 512 + 512 + 2880 + 64) * 2;
  constexpr uint64_t layer = experts + router + attention + 2 * 2880 * 2;
  constexpr uint64_t total = 24 * layer + 2ull * 201088 * 2880 * 2 + 2880 * 2;
  static_assert(total == 13761264768ull);
  EXPECT_EQ(weight_bytes("gpt-oss-20b"), total);
}

TEST(PlanRealConfigs, GptOss120b) {
  auto m = load("gpt-oss-120b");
  EXPECT_EQ(layers_of(m, keel::AttentionKind::Sliding), 18);
  EXPECT_EQ(growing(m, KvFormat::BF16), 2 * 18 * 8 * 64 * 2);  // 36,864
}

TEST(PlanRealConfigs, Gemma3_FivesSlidingToOneFull) {
  auto m = load("medgemma-27b-it-gemma3");  // Gemma-3-27B text architecture under text_config
  // layer_types: 62 layers, every 6th full -> 10 full, 52 sliding (window 1024); 16 KV heads of 128.
  EXPECT_EQ(layers_of(m, keel::AttentionKind::Full), 10);
  EXPECT_EQ(layers_of(m, keel::AttentionKind::Sliding), 52);
  EXPECT_EQ(growing(m, KvFormat::BF16), 2 * 10 * 16 * 128 * 2);  // 81,920
  const auto& sliding = group_of(m, keel::AttentionKind::Sliding);
  EXPECT_EQ(plan::group_bytes_per_token(sliding, KvFormat::BF16), 2 * 52 * 16 * 128 * 2);  // 425,984
  // The 1,024-token window at most 66 blocks (1,056 tokens), as for gpt-oss above.
  EXPECT_EQ(plan::kv_bytes_for_context(m.layout, plan::KvPreset::Full, 131072),
            81920ull * 131072 + 425984ull * 1056);
  // Weights, bf16, by hand. Text (tied embedding, counted once): embed 262208 x 5376; per layer q and
  // o 4096 x 5376, k and v 2048 x 5376, FFN 3 x 21504 x 5376, four norms of 5376, q/k norms of 128;
  // a final norm. Vision tower (SigLIP, 27 layers of width 1152, MLP 4304, biases and layer norms),
  // patch and position embeddings, and the 1152 -> 5376 projector with its norm.
  constexpr uint64_t text = 262208ull * 5376 +
                            62 * (2ull * 4096 * 5376 + 2ull * 2048 * 5376 + 3ull * 21504 * 5376 + 4 * 5376 + 2 * 128) +
                            5376;
  constexpr uint64_t vision_layer = 4 * (1152ull * 1152 + 1152) + (1152ull * 4304 + 4304) + (4304ull * 1152 + 1152) +
                                    2 * 2 * 1152;
  constexpr uint64_t vision = 27 * vision_layer + (1152ull * 3 * 14 * 14 + 1152) + (896 / 14) * (896 / 14) * 1152ull +
                              2 * 1152;
  constexpr uint64_t projector = 1152ull * 5376 + 1152;
  static_assert((text + vision + projector) * 2 == 54864813280ull);
  EXPECT_EQ(weight_bytes("medgemma-27b-it-gemma3"), (text + vision + projector) * 2);
}

TEST(PlanRealConfigs, Gemma4_GlobalLayersHaveTheirOwnHeads) {
  auto m = load("gemma-4-26B-A4B");
  // 25 sliding layers: 8 KV heads x head_dim 256, window 1024.
  // 5 full layers: attention_k_eq_v -> num_global_key_value_heads 2 x global_head_dim 512.
  EXPECT_EQ(layers_of(m, keel::AttentionKind::Sliding), 25);
  EXPECT_EQ(layers_of(m, keel::AttentionKind::Full), 5);
  EXPECT_EQ(growing(m, KvFormat::BF16), 2 * 5 * 2 * 512 * 2);  // 20,480
  EXPECT_EQ(plan::group_bytes_per_token(group_of(m, keel::AttentionKind::Sliding), KvFormat::BF16),
            2 * 25 * 8 * 256 * 2);  // 204,800
  EXPECT_EQ(group_of(m, keel::AttentionKind::Sliding).shape.window, 1024);
  // At 32k the 5 full layers hold all 32,768 tokens and the 25 sliding ones 1,056 (their window in
  // whole blocks, as for gpt-oss above).
  EXPECT_EQ(plan::kv_bytes_for_context(m.layout, plan::KvPreset::Full, 32768), 20480ull * 32768 + 204800ull * 1056);
}

// What serve allocates is what plan counts: for every fixture config keel can run, the planner's
// KV bytes (read from config.json alone) equal the pool's footprint function (kv_footprint.h, which
// the pool tests hold to the pool's own byte counts) for the spec serve would load.
TEST(PlanRealConfigs, PlanKvBytesAreThePoolFootprintOfEveryRunnableConfig) {
  int runnable = 0;
  for (const auto& entry : std::filesystem::directory_iterator(keel::test::shared_dir() / "fixtures/configs")) {
    const std::string name = entry.path().filename().string();
    const auto m = load(name);
    keel::ModelSpec spec;
    try {
      spec = keel::arch::runnable_spec(m.config);
    } catch (const keel::Error&) {
      continue;  // a family keel cannot run yet: nothing is allocated for it
    }
    ++runnable;
    for (plan::KvPreset policy : plan::kPresetsByPrecision) {
      for (int64_t context : {1, 16, 100, 1024, 1025, 4096, 32768, 131072}) {
        EXPECT_EQ(plan::kv_bytes_for_context(m.layout, policy, context),
                  static_cast<uint64_t>(keel::kv::kv_context_bytes(spec, keel::kv::KvPolicy::preset(policy), context)))
            << name << " " << plan::kv_preset_name(policy) << " " << context;
      }
    }
  }
  EXPECT_GE(runnable, 10);  // dense Llama/Qwen, Qwen3-MoE, gpt-oss, Gemma 3 and Gemma 4 among them
}

TEST(PlanRealConfigs, Qwen3_14B_Mlx4bit) {
  auto m = load("Qwen3-14B-MLX-4bit");
  EXPECT_EQ(growing(m, KvFormat::BF16), 2 * 40 * 8 * 128 * 2);  // 163,840
  auto config = keel::ConfigView::load(config_dir("Qwen3-14B-MLX-4bit") / "config.json");
  auto inv = plan::inventory_weights(config_dir("Qwen3-14B-MLX-4bit"), config);
  // The index's declared total: packed 4-bit weights plus their bf16 scales and biases. By hand
  // from config.json (hidden 5120, 40 layers, q 40 x 128, kv 8 x 128, FFN 17408, vocab 151936,
  // untied lm_head, q/k norms of 128):
  constexpr uint64_t embed = 151936ull * 5120;                                   // and lm_head
  constexpr uint64_t per_layer = 5120ull * 5120 * 2 + 1024ull * 5120 * 2 + 3ull * 17408 * 5120;
  constexpr uint64_t quantized = 2 * embed + 40 * per_layer;                     // 14,767,882,240
  // each quantized weight: 4 bits + (bf16 scale + bf16 bias) / 64 = 9/16 byte
  constexpr uint64_t norms = 40ull * (5120 + 5120 + 128 + 128) + 5120;           // bf16
  static_assert(quantized * 9 / 16 + norms * 2 == 8307783680ull);
  EXPECT_EQ(inv.bytes, quantized * 9 / 16 + norms * 2);
  ASSERT_TRUE(inv.mlx.has_value());
  EXPECT_EQ(inv.mlx->bits, 4);
  EXPECT_EQ(inv.mlx->group_size, 64);
  EXPECT_DOUBLE_EQ(inv.mlx->bits_per_weight(), 4.5);  // 4 + (16-bit scale + 16-bit bias) / 64
  EXPECT_NE(inv.format.find("MLX affine 4-bit, group 64"), std::string::npos);
  EXPECT_TRUE(inv.warnings.empty()) << inv.warnings.front();
}

TEST(PlanRealConfigs, DevstralAndTheRest) {
  // Mistral-Small-3.1 architecture: 40 layers, 8 KV heads of 128, no sliding window.
  EXPECT_EQ(growing(load("Devstral-Small-2507-mistral-small-3.1-arch"), KvFormat::BF16), 2 * 40 * 8 * 128 * 2);
  // bf16 by hand: embed and lm_head 131072 x 5120 each; per layer q and o 4096 x 5120, k and v
  // 1024 x 5120, FFN 3 x 32768 x 5120, two norms of 5120; a final norm.
  constexpr uint64_t devstral_params =
      2ull * 131072 * 5120 + 40 * (2ull * 4096 * 5120 + 2ull * 1024 * 5120 + 3ull * 32768 * 5120 + 2 * 5120) + 5120;
  static_assert(devstral_params == 23572403200ull);  // the index's total_parameters
  EXPECT_EQ(weight_bytes("Devstral-Small-2507-mistral-small-3.1-arch"), devstral_params * 2);
  EXPECT_EQ(growing(load("Qwen3-Coder-480B-A35B-Instruct"), KvFormat::BF16), 2 * 62 * 8 * 128 * 2);  // 253,952
  // head_dim = 896 / 14 = 64, 2 KV heads, 24 layers.
  EXPECT_EQ(growing(load("Qwen2.5-0.5B-Instruct"), KvFormat::BF16), 2 * 24 * 2 * 64 * 2);  // 12,288
}

TEST(PlanRealConfigs, EveryFixtureConfigPlans) {
  for (const auto& entry : std::filesystem::directory_iterator(keel::test::shared_dir() / "fixtures/configs")) {
    const std::string name = entry.path().filename().string();
    auto m = load(name);
    EXPECT_GT(growing(m, KvFormat::BF16), 0) << name;
    int64_t layers = 0;
    for (const auto& g : m.layout.groups) layers += g.layers;
    EXPECT_EQ(layers, m.layout.num_layers) << name;
  }
}
