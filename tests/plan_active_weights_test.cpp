// Total vs active weight bytes in `keel plan`: a mixture-of-experts decode step reads attention,
// router, the head, one embedding row and only experts_per_token of each layer's experts. Every
// expectation is computed here from the config's own numbers, by adding up what a step reads
// (the planner gets there the other way: the total less what a step skips).
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "keel/model/active_bytes.h"
#include "keel/plan/plan_json.h"
#include "keel/plan/plan_text.h"
#include "keel/plan/planner.h"
#include "keel/plan/tensor_roles.h"
#include "test_support.h"

namespace plan = keel::plan;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json read_json(const fs::path& p) { return json::parse(std::ifstream(p)); }

plan::Plan plan_for(const fs::path& model) {
  plan::PlanRequest r;
  r.memory_gib = 64;
  r.context = 4096;
  return plan::plan_model(keel::arch::resolve_model(model), r);
}

uint64_t u(const json& j) { return j.get<uint64_t>(); }

// MLX affine: `bits` per weight packed, plus a bf16 scale and a bf16 bias per group along a row.
uint64_t mlx_bytes(uint64_t rows, uint64_t cols, uint64_t bits, uint64_t group) {
  return rows * cols * bits / 8 + rows * (cols / group) * 2 * 2;
}

// A Qwen3-MoE checkpoint in MLX affine quantization, summed part by part from config.json: norms
// stay bf16, every linear and the embedding are quantized, a router may have its own bits.
struct Qwen3MoeMlx {
  uint64_t total = 0, active = 0;
};
Qwen3MoeMlx qwen3_moe_mlx(const json& c) {
  const uint64_t d = u(c["hidden_size"]), layers = u(c["num_hidden_layers"]), vocab = u(c["vocab_size"]);
  const uint64_t hd = u(c["head_dim"]), q = u(c["num_attention_heads"]) * hd, kv = u(c["num_key_value_heads"]) * hd;
  const uint64_t experts = u(c["num_experts"]), top_k = u(c["num_experts_per_tok"]), ff = u(c["moe_intermediate_size"]);
  const uint64_t dense_ff = u(c["intermediate_size"]);
  const json& quant = c["quantization"];
  const uint64_t bits = u(quant["bits"]), group = u(quant["group_size"]);
  auto lin = [&](uint64_t rows, uint64_t cols) { return mlx_bytes(rows, cols, bits, group); };

  const uint64_t table = lin(vocab, d);
  Qwen3MoeMlx m;
  m.total = table + lin(vocab, d) + d * 2;          // embedding, lm_head, final norm
  m.active = table / vocab + lin(vocab, d) + d * 2;  // one embedding row, the whole head
  for (uint64_t i = 0; i < layers; ++i) {
    uint64_t every = lin(q, d) + lin(kv, d) * 2 + lin(d, q);  // q, k, v, o
    every += (2 * d + 2 * hd) * 2;                           // two layer norms, q and k norms
    bool dense = false;
    for (const auto& l : c.value("mlp_only_layers", json::array())) dense = dense || u(l) == i;
    if (dense) {
      every += lin(dense_ff, d) * 2 + lin(d, dense_ff);
      m.total += every;
      m.active += every;
      continue;
    }
    const std::string router = "model.layers." + std::to_string(i) + ".mlp.gate";
    const uint64_t router_bits = quant.contains(router) ? u(quant[router]["bits"]) : bits;
    every += mlx_bytes(experts, d, router_bits, group);
    const uint64_t one_expert = lin(ff, d) * 2 + lin(d, ff);  // gate, up, down
    m.total += every + experts * one_expert;
    m.active += every + top_k * one_expert;
  }
  return m;
}

}  // namespace

// The tiny MLX model's real safetensors headers: the split is by tensor name, exact for any format.
TEST(PlanActiveWeights, MlxMoeFromItsHeaders) {
  const fs::path dir = keel::test::shared_dir() / "models/tiny-qwen3moe-random-mlx4";
  const Qwen3MoeMlx want = qwen3_moe_mlx(read_json(dir / "config.json"));
  const plan::Plan p = plan_for(dir);
  EXPECT_EQ(p.weights.bytes, want.total);
  ASSERT_TRUE(p.active.active_bytes.has_value()) << p.active.source;
  EXPECT_EQ(*p.active.active_bytes, want.active);
  EXPECT_EQ(p.active.moe_layers, 2);  // layer 1 is in mlp_only_layers
  EXPECT_EQ(p.active.experts, 8);
  EXPECT_EQ(p.active.experts_per_token, 2);
  EXPECT_NE(p.active.source.find("headers"), std::string::npos);
}

// Qwen3-30B-A3B's real config as MLX 4-bit, group 64, routers at 8 bits (what mlx-lm writes), in
// a folder with only the index: the planner sizes the skipped parts from the shapes and subtracts
// them from the declared total.
TEST(PlanActiveWeights, Qwen3_30B_A3B_Mlx4FromTheDeclaredTotal) {
  json c = read_json(keel::test::shared_dir() / "fixtures/configs/Qwen3-30B-A3B/config.json");
  json quant = {{"group_size", 64}, {"bits", 4}};
  for (int64_t i = 0; i < c["num_hidden_layers"].get<int64_t>(); ++i)
    quant["model.layers." + std::to_string(i) + ".mlp.gate"] = {{"group_size", 64}, {"bits", 8}};
  c["quantization"] = quant;
  c["quantization_config"] = quant;
  const Qwen3MoeMlx want = qwen3_moe_mlx(c);

  keel::test::TempDir dir;
  std::ofstream(dir.path() / "config.json") << c.dump();
  const json index = {{"metadata", {{"total_size", want.total}}},
                      {"weight_map", {{"model.embed_tokens.weight", "model-00001-of-00001.safetensors"}}}};
  std::ofstream(dir.path() / "model.safetensors.index.json") << index.dump();

  const plan::Plan p = plan_for(dir.path());
  EXPECT_EQ(p.weights.bytes, want.total);
  ASSERT_TRUE(p.active.active_bytes.has_value()) << p.active.source;
  EXPECT_EQ(*p.active.active_bytes, want.active);
  EXPECT_EQ(p.active.moe_layers, 48);
  // About a tenth: 8 of 128 experts, plus the parts every token reads.
  EXPECT_LT(*p.active.active_bytes * 9, want.total);
}

// gpt-oss-20b's real index: its declared total_size is reproduced from the config's shapes with
// mxfp4 experts at 4.25 bits per weight (4-bit codes + one 8-bit scale per 32) and everything else
// bf16, so the 4.25 is the right rate; active is then what a step reads of it.
TEST(PlanActiveWeights, GptOss20bMxfp4FromTheDeclaredTotal) {
  const fs::path dir = keel::test::shared_dir() / "fixtures/configs/gpt-oss-20b";
  const json c = read_json(dir / "config.json");
  const uint64_t d = u(c["hidden_size"]), layers = u(c["num_hidden_layers"]), vocab = u(c["vocab_size"]);
  const uint64_t heads = u(c["num_attention_heads"]), hd = u(c["head_dim"]);
  const uint64_t q = heads * hd, kv = u(c["num_key_value_heads"]) * hd;
  const uint64_t experts = u(c["num_local_experts"]), top_k = u(c["num_experts_per_tok"]), ff = u(c["intermediate_size"]);
  const uint64_t bf16 = 2;

  const uint64_t attention = ((q + 2 * kv) * d + d * q) * bf16  // q, k, v, o
                             + (q + 2 * kv + d) * bf16          // their biases
                             + heads * bf16;                    // the sinks
  const uint64_t router = (experts * d + experts) * bf16;
  const uint64_t norms = 2 * d * bf16;
  // gate_up (2 ff x d) and down (d x ff) as 17-byte blocks of 32, their biases bf16.
  const uint64_t one_expert = (2 * ff * d + d * ff) / 32 * 17 + (2 * ff + d) * bf16;
  const uint64_t table = vocab * d * bf16;
  const uint64_t total = 2 * table + d * bf16 + layers * (attention + router + norms + experts * one_expert);
  const uint64_t active = table / vocab + table + d * bf16 + layers * (attention + router + norms + top_k * one_expert);

  EXPECT_EQ(u(read_json(dir / "model.safetensors.index.json")["metadata"]["total_size"]), total);
  const plan::Plan p = plan_for(dir);
  EXPECT_EQ(p.weights.bytes, total);
  ASSERT_TRUE(p.active.active_bytes.has_value()) << p.active.source;
  EXPECT_EQ(*p.active.active_bytes, active);
  EXPECT_EQ(p.active.routed_expert_bytes, layers * experts * one_expert);

  const json j = plan::plan_to_json(p)["weights"];
  EXPECT_EQ(j["bytes"], total);
  EXPECT_EQ(j["active_bytes_per_token"], active);
  EXPECT_EQ(j["moe"]["experts_per_token"], top_k);
  const std::string text = plan::format_plan_text(p);
  EXPECT_NE(text.find("active      3.45 GiB per decoded token"), std::string::npos) << text;
  EXPECT_NE(text.find("4 of 32 experts in each of 24 MoE layers"), std::string::npos) << text;
}

// A dense model's text plan has no active line; its JSON still says what a step reads: with tied
// embeddings the head is the table, so everything.
TEST(PlanActiveWeights, DenseTiedModelReadsEverything) {
  const plan::Plan p = plan_for(keel::test::shared_dir() / "models/tiny-toolcaller");
  EXPECT_EQ(p.active.moe_layers, 0);
  EXPECT_EQ(p.active.active_bytes, p.weights.bytes);
  EXPECT_EQ(plan::format_plan_text(p).find("  active "), std::string::npos);
}

// Without weight files the split comes from config.json's shapes, in the format it declares.
TEST(PlanActiveWeights, ConfigOnlyFolderSplitsFromItsShapes) {
  const plan::Plan p = plan_for(keel::test::shared_dir() / "fixtures/configs/Qwen3-30B-A3B");
  ASSERT_TRUE(p.active.active_bytes.has_value()) << p.active.source;
  EXPECT_EQ(*p.active.active_bytes, 2 * static_cast<uint64_t>(p.shapes.active_parameters));  // bf16
  EXPECT_NE(p.active.source.find("config.json's shapes as bf16"), std::string::npos) << p.active.source;
}

// Only the declared total, in a format keel plan does not model (fp8): nothing is guessed.
TEST(PlanActiveWeights, UnmodelledFormatGivesUnknownActive) {
  json c = read_json(keel::test::shared_dir() / "fixtures/configs/Qwen3-30B-A3B/config.json");
  c["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};
  keel::test::TempDir dir;
  std::ofstream(dir.path() / "config.json") << c.dump();
  const json index = {{"metadata", {{"total_size", 31000000000ull}}},
                      {"weight_map", {{"model.embed_tokens.weight", "model-00001-of-00001.safetensors"}}}};
  std::ofstream(dir.path() / "model.safetensors.index.json") << index.dump();
  const plan::Plan p = plan_for(dir.path());
  EXPECT_EQ(p.weight_bytes, 31000000000ull);
  EXPECT_FALSE(p.active.active_bytes.has_value());
  EXPECT_NE(plan::format_plan_text(p).find("active      unknown"), std::string::npos);
}

TEST(PlanActiveWeights, TensorRolesByName) {
  using plan::TensorRole;
  int64_t layer = -1;
  EXPECT_EQ(plan::tensor_role("model.layers.7.mlp.experts.12.down_proj.weight", layer), TensorRole::RoutedExpert);
  EXPECT_EQ(layer, 7);
  EXPECT_EQ(plan::tensor_role("model.layers.3.mlp.switch_mlp.up_proj.scales", layer), TensorRole::RoutedExpert);
  EXPECT_EQ(layer, 3);
  EXPECT_EQ(plan::tensor_role("model.layers.0.mlp.experts.gate_up_proj_blocks", layer), TensorRole::RoutedExpert);
  // Shared experts and the router are read by every token.
  EXPECT_EQ(plan::tensor_role("model.layers.5.mlp.shared_experts.up_proj.weight", layer), TensorRole::EveryToken);
  EXPECT_EQ(plan::tensor_role("model.layers.5.mlp.shared_expert.up_proj.weight", layer), TensorRole::EveryToken);
  EXPECT_EQ(plan::tensor_role("model.layers.5.mlp.gate.weight", layer), TensorRole::EveryToken);
  EXPECT_EQ(plan::tensor_role("model.embed_tokens.scales", layer), TensorRole::Embedding);
  EXPECT_EQ(plan::tensor_role("lm_head.weight", layer), TensorRole::OutputHead);
  EXPECT_EQ(plan::tensor_role("vision_tower.encoder.layers.2.mlp.fc1.weight", layer), TensorRole::NotDecoded);
}

// The shared rule: untied reads one embedding row, tied reads the whole table as the head.
TEST(PlanActiveWeights, DecodeRuleCountsTheHeadAndOneEmbeddingRow) {
  keel::WeightBytesByUse w;
  w.embedding = 1000 * 64;
  w.vocab_size = 1000;
  w.output_head = 1000 * 64;
  w.every_token = 500;
  w.not_decoded = 7;
  w.routed = {{8 * 100, 8, 2}, {8 * 100, 8, 2}};
  auto d = keel::decode_weight_bytes(w);
  EXPECT_EQ(d.resident, 64000u + 64000 + 500 + 7 + 1600);
  EXPECT_EQ(d.active, 64u + 64000 + 500 + 2 * 200);
  w.tied_head = true;
  w.output_head = 0;
  d = keel::decode_weight_bytes(w);
  EXPECT_EQ(d.active, 64000u + 500 + 2 * 200);
}
