// What a model folder really holds: weight bytes from safetensors headers or the index's
// total_size, and warnings for two copies of the weights and shards that disagree with the index.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "keel/model/config_view.h"
#include "keel/plan/weight_inventory.h"
#include "test_support.h"

namespace plan = keel::plan;
namespace fs = std::filesystem;

namespace {

struct FakeTensor {
  std::string name;
  std::string dtype;  // "BF16", "U32"...
  std::vector<int64_t> shape;
  size_t element_bytes;
};

// A valid safetensors file with zeroed data, so headers can be read for real.
void write_safetensors(const fs::path& path, const std::vector<FakeTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    uint64_t n = t.element_bytes;
    for (auto d : t.shape) n *= static_cast<uint64_t>(d);
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string h = header.dump();
  std::ofstream out(path, std::ios::binary);
  uint64_t len = h.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((len >> (8 * i)) & 0xff));
  out << h << std::string(offset, '\0');
}

void write_json(const fs::path& path, const nlohmann::json& j) { std::ofstream(path) << j.dump(2); }

const nlohmann::json kConfig = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"},
                                {"torch_dtype", "bfloat16"}};

plan::WeightInventory inventory(const fs::path& dir, const nlohmann::json& config = kConfig) {
  return plan::inventory_weights(dir, keel::ConfigView(config, (dir / "config.json").string()));
}

bool any_warning_has(const plan::WeightInventory& inv, const std::string& text) {
  for (const auto& w : inv.warnings) {
    if (w.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST(PlanWeightInventory, TinyToolcallerBf16FromItsHeader) {
  const fs::path dir = keel::test::shared_dir() / "models/tiny-toolcaller";
  auto inv = plan::inventory_weights(dir, keel::ConfigView::load(dir / "config.json"));
  // Qwen2, 4 layers, hidden 256, FFN 704, 4 heads and 2 KV heads of 64, vocab 1661, tied, bf16:
  //   embedding 1661 x 256                                             =   425,216
  //   per layer: q 256x256 + 256 bias, k and v 128x256 + 128 bias each,
  //              o 256x256, gate/up/down 3 x 256x704, 2 norms of 256    =   738,304
  //   4 layers = 2,953,216; final norm 256
  //   3,378,688 parameters x 2 bytes                                   = 6,757,376 bytes
  EXPECT_EQ(inv.bytes, 6757376u);
  EXPECT_EQ(inv.bytes_source, "safetensors header of model.safetensors");
  EXPECT_EQ(inv.format, "bf16");
  EXPECT_TRUE(inv.warnings.empty());
}

TEST(PlanWeightInventory, TinyToolcallerMlx4IncludesScalesAndBiases) {
  const fs::path dir = keel::test::shared_dir() / "models/tiny-toolcaller-mlx4";
  auto inv = plan::inventory_weights(dir, keel::ConfigView::load(dir / "config.json"));
  // Quantized matrices (embedding + every linear): 425,216 + 4 x 737,280 = 3,374,336 weights.
  // Each costs 4 bits packed in U32 plus, per group of 64, a bf16 scale and a bf16 bias:
  //   3,374,336 x (1/2 + 4/64) bytes = 3,374,336 x 9/16                =  1,898,064 bytes
  // Unquantized bf16: q/k/v biases 4 x 512 + norms 4 x 512 + 256 = 4,352 x 2 = 8,704 bytes
  EXPECT_EQ(inv.bytes, 1898064u + 8704u);
  ASSERT_TRUE(inv.mlx.has_value());
  EXPECT_EQ(inv.mlx->bits, 4);
  ASSERT_FALSE(inv.bytes_by_dtype.empty());
  EXPECT_EQ(inv.bytes_by_dtype.front().first, "U32");  // the packed weights dominate
  EXPECT_TRUE(inv.warnings.empty()) << inv.warnings.front();
}

TEST(PlanWeightInventory, NoWeightsMeansUnknownNotEstimated) {
  keel::test::TempDir dir;
  auto inv = inventory(dir.path());
  EXPECT_FALSE(inv.bytes.has_value());
  EXPECT_EQ(inv.bytes_source, "no weight files and no model.safetensors.index.json in the folder");
}

TEST(PlanWeightInventory, ShardedFolderCountsHeadersAndChecksTheIndex) {
  keel::test::TempDir dir;
  write_safetensors(dir.path() / "model-00001-of-00002.safetensors", {{"a", "BF16", {4, 8}, 2}});
  write_safetensors(dir.path() / "model-00002-of-00002.safetensors", {{"b", "BF16", {16}, 2}});
  write_json(dir.path() / "model.safetensors.index.json",
             {{"metadata", {{"total_size", 96}}},
              {"weight_map", {{"a", "model-00001-of-00002.safetensors"}, {"b", "model-00002-of-00002.safetensors"}}}});
  auto inv = inventory(dir.path());
  EXPECT_EQ(inv.bytes, 4u * 8 * 2 + 16 * 2);  // 96
  EXPECT_TRUE(inv.warnings.empty()) << inv.warnings.front();
  EXPECT_EQ(inv.counted_files.size(), 2u);
}

TEST(PlanWeightInventory, WarnsWhenTheIndexDisagreesWithTheShards) {
  keel::test::TempDir dir;
  write_safetensors(dir.path() / "model-00001-of-00002.safetensors", {{"a", "BF16", {4}, 2}});
  write_safetensors(dir.path() / "model-00002-of-00002.safetensors", {{"b", "BF16", {4}, 2}});
  // The index puts `c` in shard 2, which does not hold it, and declares a different total.
  write_json(dir.path() / "model.safetensors.index.json",
             {{"metadata", {{"total_size", 999}}},
              {"weight_map",
               {{"a", "model-00001-of-00002.safetensors"},
                {"b", "model-00002-of-00002.safetensors"},
                {"c", "model-00002-of-00002.safetensors"}}}});
  auto inv = inventory(dir.path());
  EXPECT_EQ(inv.bytes, 16u);
  EXPECT_TRUE(any_warning_has(inv, "do not hold them: c (in model-00002-of-00002.safetensors)"));
  EXPECT_TRUE(any_warning_has(inv, "declares total_size 999"));
}

TEST(PlanWeightInventory, WarnsAboutMissingShardsAndUsesTheDeclaredTotal) {
  keel::test::TempDir dir;
  write_safetensors(dir.path() / "model-00001-of-00002.safetensors", {{"a", "BF16", {4}, 2}});
  write_json(dir.path() / "model.safetensors.index.json",
             {{"metadata", {{"total_size", 16}}},
              {"weight_map", {{"a", "model-00001-of-00002.safetensors"}, {"b", "model-00002-of-00002.safetensors"}}}});
  auto inv = inventory(dir.path());
  EXPECT_EQ(inv.bytes, 16u);
  EXPECT_TRUE(any_warning_has(inv, "1 are not in the folder: model-00002-of-00002.safetensors"));
}

TEST(PlanWeightInventory, GptOssShardNamesDisagreeWithTheirIndex) {
  // The real gpt-oss-20b index lists model-00000/00001/00002-of-00002: three shards named "of 2".
  const fs::path dir = keel::test::shared_dir() / "fixtures/configs/gpt-oss-20b";
  auto inv = plan::inventory_weights(dir, keel::ConfigView::load(dir / "config.json"));
  EXPECT_TRUE(any_warning_has(inv, "shard names disagree with the index: they say '-of-00002' but"));
  EXPECT_TRUE(any_warning_has(inv, "lists 3 shard files"));
  EXPECT_NE(inv.format.find("mxfp4"), std::string::npos);
}

TEST(PlanWeightInventory, TwoCopiesAreCountedOnceAndReported) {
  keel::test::TempDir dir;
  write_safetensors(dir.path() / "model.safetensors", {{"w", "BF16", {64}, 2}});
  write_safetensors(dir.path() / "consolidated.safetensors", {{"w", "BF16", {64}, 2}});
  std::ofstream(dir.path() / "pytorch_model.bin") << "not really";
  auto inv = inventory(dir.path());
  EXPECT_EQ(inv.bytes, 128u);  // one copy, not the sum of the folder
  EXPECT_TRUE(any_warning_has(inv, "two copies of the weights: model.safetensors and Mistral's consolidated format"));
  EXPECT_TRUE(any_warning_has(inv, "PyTorch .bin files"));
}

TEST(PlanWeightInventory, ShardsPlusASingleFileAreTwoCopies) {
  keel::test::TempDir dir;
  write_safetensors(dir.path() / "model-00001-of-00001.safetensors", {{"w", "BF16", {64}, 2}});
  write_safetensors(dir.path() / "model.safetensors", {{"w", "BF16", {64}, 2}});
  write_json(dir.path() / "model.safetensors.index.json",
             {{"weight_map", {{"w", "model-00001-of-00001.safetensors"}}}});
  fs::create_directory(dir.path() / "original");
  std::ofstream(dir.path() / "original" / "consolidated.00.pth") << "x";
  auto inv = inventory(dir.path());
  EXPECT_EQ(inv.bytes, 128u);
  EXPECT_TRUE(any_warning_has(inv, "a single-file model.safetensors"));
  EXPECT_TRUE(any_warning_has(inv, "original/ (consolidated.00.pth"));
}

TEST(PlanWeightInventory, MlxConfigWithoutScalesIsReported) {
  keel::test::TempDir dir;
  write_safetensors(dir.path() / "model.safetensors", {{"w.weight", "BF16", {64}, 2}});
  nlohmann::json config = kConfig;
  config["quantization"] = {{"group_size", 64}, {"bits", 4}};
  auto inv = inventory(dir.path(), config);
  EXPECT_TRUE(any_warning_has(inv, "declares MLX quantization but no tensor has a .scales companion"));
}

TEST(PlanWeightInventory, FormatsFromTheConfig) {
  std::optional<plan::MlxQuantBlock> mlx;
  auto describe = [&](const char* name) {
    auto dir = keel::test::shared_dir() / "fixtures/configs" / name;
    return plan::describe_weight_format(keel::ConfigView::load(dir / "config.json"), mlx);
  };
  EXPECT_EQ(describe("Llama-3.3-70B-Instruct"), "bf16");
  EXPECT_EQ(describe("DeepSeek-V3"), "fp8 e4m3, scales per 128x128 block (unquantized tensors bf16)");
  EXPECT_EQ(describe("medgemma-27b-it-gemma3"), "bf16");  // torch_dtype inside text_config
  EXPECT_EQ(describe("gemma-4-26B-A4B"), "bf16");         // "dtype", the newer spelling
}
