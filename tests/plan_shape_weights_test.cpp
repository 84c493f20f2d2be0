// `keel plan` before the download: weight bytes and parameter counts from config.json's shapes,
// per weight format. Where files exist, the computed tensors must be the files' tensors exactly
// (names, shapes, bytes): a consistency check between the planner's tensor list and the loader.
// Where they do not, the counts are checked against arithmetic done here from the config's own
// numbers, and against the parameter counts the model cards publish.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "keel/arch/checkpoint_tensors.h"
#include "keel/arch/family.h"
#include "keel/arch/model_loader.h"
#include "keel/model/config_view.h"
#include "keel/model/safetensors.h"
#include "keel/plan/measured_bandwidth.h"
#include "keel/plan/plan_json.h"
#include "keel/plan/plan_text.h"
#include "keel/plan/planner.h"
#include "keel/plan/unserved_tensor_lists.h"
#include "keel/plan/weight_storage.h"
#include "keel/util/error.h"
#include "test_support.h"

namespace plan = keel::plan;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

fs::path models() { return keel::test::shared_dir() / "models"; }
fs::path configs() { return keel::test::shared_dir() / "fixtures/configs"; }
json read_json(const fs::path& p) { return json::parse(std::ifstream(p)); }
uint64_t u(const json& j) { return j.get<uint64_t>(); }

plan::Plan plan_for(const fs::path& model, std::optional<std::string> weights = std::nullopt) {
  plan::PlanRequest r;
  r.memory_gib = 1024;
  r.context = 4096;
  r.weights_format = std::move(weights);
  return plan::plan_model(keel::arch::resolve_model(model), r);
}

// Every model folder in shared/models (the GGUF folder holds no config.json).
std::vector<fs::path> shared_model_folders() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(models()))
    if (fs::exists(e.path() / "config.json")) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Points a test at an empty bandwidth cache of its own, and restores the environment after.
class CacheDir {
 public:
  CacheDir() {
    if (const char* old = std::getenv("KEEL_CACHE_DIR")) old_ = old;
    setenv("KEEL_CACHE_DIR", dir_.path().c_str(), 1);
  }
  ~CacheDir() {
    if (old_) {
      setenv("KEEL_CACHE_DIR", old_->c_str(), 1);
    } else {
      unsetenv("KEEL_CACHE_DIR");
    }
  }
  const fs::path& path() const { return dir_.path(); }

 private:
  keel::test::TempDir dir_;
  std::optional<std::string> old_;
};

const plan::FormatWeights& format_row(const plan::Plan& p, const std::string& name) {
  for (const auto& f : p.shapes.formats)
    if (f.format.name() == name) return f;
  throw std::runtime_error("no format row " + name);
}

}  // namespace

// The headline invariant: on every shared model folder, in the format it is stored in, the plan's
// tensors are the file's tensors (the planner compares them name by name) and the computed total
// is the header total to the byte.
TEST(PlanShapeWeights, ComputedEqualsTheFilesOnEverySharedModel) {
  const auto folders = shared_model_folders();
  ASSERT_GE(folders.size(), 12u);
  std::set<std::string> formats_seen;
  for (const fs::path& dir : folders) {
    SCOPED_TRACE(dir.string());
    const plan::Plan p = plan_for(dir);
    ASSERT_TRUE(p.shapes.unavailable.empty()) << p.shapes.unavailable;
    ASSERT_TRUE(p.weights.bytes.has_value());
    ASSERT_EQ(p.shapes.matches_files, true) << p.shapes.files_check;
    const plan::FormatWeights* f = p.shapes.selected_format();
    ASSERT_NE(f, nullptr);
    EXPECT_TRUE(f->configured);
    const keel::SafetensorsHeader h = keel::read_safetensors_header(dir / "model.safetensors");
    uint64_t header_bytes = 0;
    for (const auto& t : h.tensors) header_bytes += t.byte_size();
    EXPECT_EQ(f->bytes, header_bytes);
    EXPECT_EQ(p.weight_bytes, header_bytes);
    formats_seen.insert(f->format.name());
  }
  // bf16, f16, f32, MLX 4- and 8-bit and MXFP4 folders are all among them.
  for (const char* name : {"bf16", "f16", "f32", "mlx4-g64", "mlx8-g64", "mxfp4"}) EXPECT_TRUE(formats_seen.count(name)) << name;
}

// The same check done here rather than by the planner: the arch seam's tensor list stored in the
// folder's format gives every header tensor's name, shape and byte count, and nothing else.
TEST(PlanShapeWeights, TensorListMatchesHeadersNameShapeAndBytes) {
  struct Case {
    const char* folder;
    plan::StorageFormat format;
  };
  const plan::StorageFormat bf16{};
  const std::vector<Case> cases = {
      {"tiny-toolcaller", bf16},
      {"tiny-toolcaller-mlx4", {plan::StorageFormat::Kind::MlxAffine, 2, false, 4, 64}},
      {"tiny-toolcaller-mlx8", {plan::StorageFormat::Kind::MlxAffine, 2, false, 8, 64}},
      {"tiny-qwen3-random", bf16},
      {"tiny-llama3-random", {plan::StorageFormat::Kind::Float, 2, true}},
      {"stories260K-hf", {plan::StorageFormat::Kind::Float, 4}},
      {"tiny-qwen3moe-random", bf16},
      {"tiny-qwen3moe-random-mlx4", {plan::StorageFormat::Kind::MlxAffine, 2, false, 4, 64}},
      {"tiny-gptoss-random", {plan::StorageFormat::Kind::Mxfp4}},
      {"tiny-gemma3-random", bf16},
      {"tiny-gemma4-random", bf16},
      {"tiny-qwen3next-random", bf16},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.folder);
    const fs::path dir = models() / c.folder;
    const keel::ConfigView config = keel::ConfigView::load(dir / "config.json");
    const keel::ModelSpec spec = keel::arch::describe_spec(config);
    std::vector<keel::arch::CheckpointTensor> list;
    if (const keel::arch::Family* f = keel::arch::find_family(spec.model_type)) {
      keel::TensorNames names = f->tensor_names();
      if (config.has_text_config()) names = names.rooted_at(keel::kMultimodalRoots[0]);
      list = keel::arch::checkpoint_tensors(spec, names, std::string(c.folder).find("mlx") != std::string::npos);
    } else {
      auto unserved = plan::unserved_tensor_list(spec, config);
      ASSERT_TRUE(unserved.has_value());
      list = unserved->tensors;
    }
    std::map<std::string, plan::StoredTensor> computed;
    for (auto& t : plan::stored_tensors(list, c.format, spec.quantization_overrides)) computed[t.name] = t;
    const keel::SafetensorsHeader h = keel::read_safetensors_header(dir / "model.safetensors");
    EXPECT_EQ(computed.size(), h.tensors.size());
    for (const auto& t : h.tensors) {
      auto it = computed.find(t.name);
      ASSERT_NE(it, computed.end()) << t.name << " is in the file, not in the list";
      EXPECT_EQ(it->second.shape, t.shape) << t.name;
      EXPECT_EQ(it->second.bytes, t.byte_size()) << t.name;
    }
  }
}

// The loader reads what the list says: every servable shared folder loads, and its loaded
// matrices' bytes (the rule bench divides by) equal the plan's resident bytes less the vectors.
TEST(PlanShapeWeights, TheLoaderAcceptsEveryServableFolderThePlanSizes) {
  for (const fs::path& dir : shared_model_folders()) {
    SCOPED_TRACE(dir.string());
    const plan::Plan p = plan_for(dir);
    ASSERT_FALSE(p.shapes.not_servable.has_value());
    const keel::ModelWeights w = keel::arch::load_model(dir);
    EXPECT_EQ(p.active.active_bytes.has_value(), true);
    EXPECT_LE(w.decode_bytes().resident, *p.weight_bytes);
  }
}

// Formats other than the folder's own, computed from a bf16 folder, equal the real MLX folders
// made from it: the quantized layout (packed words, a scale and a bias per group) is exact.
TEST(PlanShapeWeights, MlxFormatsFromBf16ShapesEqualTheRealMlxFolders) {
  const plan::Plan bf16 = plan_for(models() / "tiny-toolcaller");
  for (const auto& [format, folder] : {std::pair{"mlx4-g64", "tiny-toolcaller-mlx4"}, std::pair{"mlx8-g64", "tiny-toolcaller-mlx8"}}) {
    const plan::Plan real = plan_for(models() / folder);
    EXPECT_EQ(format_row(bf16, format).bytes, *real.weights.bytes) << format;
  }
  // --weights picks the format; the fit then uses its bytes, not the files'.
  const plan::Plan as_mlx4 = plan_for(models() / "tiny-toolcaller", "mlx4");
  EXPECT_EQ(as_mlx4.weight_bytes, plan_for(models() / "tiny-toolcaller-mlx4").weights.bytes);
  EXPECT_NE(as_mlx4.weight_bytes_source.find("mlx4-g64"), std::string::npos) << as_mlx4.weight_bytes_source;
  // Asking for the files' own format keeps the files' bytes.
  const plan::Plan as_bf16 = plan_for(models() / "tiny-toolcaller", "bf16");
  EXPECT_EQ(as_bf16.weight_bytes_source, "safetensors header of model.safetensors");
}

// MLX by hand for one matrix shape that the group does not divide: mlx-lm leaves it unquantized.
TEST(PlanShapeWeights, MlxStorageRules) {
  std::vector<keel::arch::CheckpointTensor> list = {
      {"a", {256, 128}, true, true, keel::arch::kStoredFloat | keel::arch::kStoredMlxAffine},
      {"b", {256, 96}, true, true, keel::arch::kStoredFloat | keel::arch::kStoredMlxAffine},
      {"n.weight", {128}, false, false, keel::arch::kStoredFloat},
  };
  const plan::StorageFormat mlx4_g64{plan::StorageFormat::Kind::MlxAffine, 2, false, 4, 64};
  std::map<std::string, uint64_t> bytes;
  for (const auto& t : plan::stored_tensors(list, mlx4_g64)) bytes[t.name] = t.bytes;
  EXPECT_EQ(bytes["a.weight"], 256u * 128 / 2);     // 4 bits each
  EXPECT_EQ(bytes["a.scales"], 256u * 2 * 2);       // two groups a row, bf16
  EXPECT_EQ(bytes["a.biases"], 256u * 2 * 2);
  EXPECT_EQ(bytes["b.weight"], 256u * 96 * 2);      // 96 % 64 != 0: bf16
  EXPECT_EQ(bytes.count("b.scales"), 0u);
  EXPECT_EQ(bytes["n.weight"], 128u * 2);
  // A per-module override (an 8-bit router) applies to that module only.
  const plan::MlxOverrides router8 = {{"a", keel::MlxQuantization{8, 64, "affine"}}};
  for (const auto& t : plan::stored_tensors(list, mlx4_g64, router8))
    if (t.name == "a.weight") {
      EXPECT_EQ(t.bytes, 256u * 128);
    }
}

// Qwen3-30B-A3B from config.json alone (the folder has nothing else): every part by hand.
TEST(PlanShapeWeights, Qwen3_30B_A3B_FromTheConfigAlone) {
  const fs::path dir = configs() / "Qwen3-30B-A3B";
  const json c = read_json(dir / "config.json");
  const uint64_t d = u(c["hidden_size"]), layers = u(c["num_hidden_layers"]), vocab = u(c["vocab_size"]);
  const uint64_t hd = u(c["head_dim"]), q = u(c["num_attention_heads"]) * hd, kv = u(c["num_key_value_heads"]) * hd;
  const uint64_t experts = u(c["num_experts"]), top_k = u(c["num_experts_per_tok"]), ff = u(c["moe_intermediate_size"]);
  const uint64_t attention = q * d + 2 * kv * d + d * q + 2 * hd;  // q, k, v, o, q/k norms
  const uint64_t layer_every = attention + 2 * d + experts * d;     // two norms, the router
  const uint64_t expert = 3 * ff * d;
  const uint64_t total = 2 * vocab * d + d + layers * (layer_every + experts * expert);
  const uint64_t active = d + vocab * d + d + layers * (layer_every + top_k * expert);

  const plan::Plan p = plan_for(dir);
  EXPECT_FALSE(p.weights.bytes.has_value());  // no files
  EXPECT_EQ(u(json(p.shapes.total_parameters)), total);
  EXPECT_EQ(u(json(p.shapes.active_parameters)), active);
  ASSERT_TRUE(p.weight_bytes.has_value());
  EXPECT_EQ(*p.weight_bytes, 2 * total);  // bf16, as config.json says
  EXPECT_EQ(p.active.active_bytes, 2 * active);
  EXPECT_TRUE(p.chosen.has_value());      // a verdict: 57 GiB fits the 1 TiB ceiling
  EXPECT_FALSE(p.shapes.not_servable.has_value());
  for (const auto& f : p.shapes.formats) EXPECT_FALSE(f.not_loadable.has_value()) << f.format.name();
  // Published: 30.5B total, 3.3B active (the card counts the whole input embedding table).
  EXPECT_NEAR(static_cast<double>(p.shapes.total_parameters) / 1e9, 30.5, 0.05);
  EXPECT_NEAR(static_cast<double>(p.shapes.active_parameters_with_embedding_table) / 1e9, 3.3, 0.06);
  const std::string text = plan::format_plan_text(p);
  EXPECT_NE(text.find("parameters  30.53B total, 3.042B active per token"), std::string::npos) << text;
  EXPECT_NE(text.find("mlx4-g64"), std::string::npos);
  EXPECT_NE(text.find("GGUF"), std::string::npos);
}

// Qwen3-Next: the loader's tensor list (the same one that loads tiny-qwen3next-random above), the
// 80B config by hand from transformers' modeling file.
TEST(PlanShapeWeights, Qwen3Next80BFromTheConfigAlone) {
  const fs::path dir = configs() / "Qwen3-Next-80B-A3B-Thinking";
  const json c = read_json(dir / "config.json");
  const uint64_t d = u(c["hidden_size"]), layers = u(c["num_hidden_layers"]), vocab = u(c["vocab_size"]);
  const uint64_t hd = u(c["head_dim"]), heads = u(c["num_attention_heads"]), kvh = u(c["num_key_value_heads"]);
  const uint64_t kh = u(c["linear_num_key_heads"]), vh = u(c["linear_num_value_heads"]);
  const uint64_t kd = u(c["linear_key_head_dim"]), vd = u(c["linear_value_head_dim"]), conv = u(c["linear_conv_kernel_dim"]);
  const uint64_t experts = u(c["num_experts"]), top_k = u(c["num_experts_per_tok"]), ff = u(c["moe_intermediate_size"]);
  const uint64_t shared = u(c["shared_expert_intermediate_size"]), interval = u(c["full_attention_interval"]);
  const uint64_t linear = (2 * kh * kd + 2 * vh * vd) * d + 2 * vh * d + (2 * kh * kd + vh * vd) * conv + 2 * vh + vd +
                          d * vh * vd;
  const uint64_t full = 2 * heads * hd * d + 2 * kvh * hd * d + d * heads * hd + 2 * hd;
  const uint64_t moe_every = experts * d + 3 * shared * d + d + 2 * d;  // router, shared expert and its gate, norms
  uint64_t total = 2 * vocab * d + d, active = d + vocab * d + d;
  for (uint64_t i = 0; i < layers; ++i) {
    const uint64_t attn = (i + 1) % interval == 0 ? full : linear;
    total += attn + moe_every + experts * 3 * ff * d;
    active += attn + moe_every + top_k * 3 * ff * d;
  }
  const plan::Plan p = plan_for(dir);
  EXPECT_EQ(u(json(p.shapes.total_parameters)), total);
  EXPECT_EQ(u(json(p.shapes.active_parameters)), active);
  EXPECT_FALSE(p.shapes.not_servable.has_value());
  EXPECT_NEAR(static_cast<double>(p.shapes.total_parameters) / 1e9, 80, 0.5);  // published: 80B
}

// DeepSeek-V3 (MLA, DeepSeekMoE): published 671B total, 37B active; the MTP layer is not counted.
TEST(PlanShapeWeights, DeepSeekV3FromTheConfigAlone) {
  const fs::path dir = configs() / "DeepSeek-V3";
  const json c = read_json(dir / "config.json");
  const uint64_t d = u(c["hidden_size"]), layers = u(c["num_hidden_layers"]), vocab = u(c["vocab_size"]);
  const uint64_t heads = u(c["num_attention_heads"]), qr = u(c["q_lora_rank"]), kvr = u(c["kv_lora_rank"]);
  const uint64_t nope = u(c["qk_nope_head_dim"]), rope = u(c["qk_rope_head_dim"]), vd = u(c["v_head_dim"]);
  const uint64_t dense = u(c["first_k_dense_replace"]), inter = u(c["intermediate_size"]);
  const uint64_t experts = u(c["n_routed_experts"]), top_k = u(c["num_experts_per_tok"]), ff = u(c["moe_intermediate_size"]);
  const uint64_t shared = u(c["n_shared_experts"]);
  const uint64_t attention = qr * d + qr + heads * (nope + rope) * qr + (kvr + rope) * d + kvr + heads * (nope + vd) * kvr +
                             d * heads * vd + 2 * d;
  uint64_t total = 2 * vocab * d + d, active = d + vocab * d + d;
  for (uint64_t i = 0; i < layers; ++i) {
    if (i < dense) {
      total += attention + 3 * inter * d;
      active += attention + 3 * inter * d;
      continue;
    }
    const uint64_t every = attention + experts * d + experts + 3 * shared * ff * d;  // router, its bias, shared
    total += every + experts * 3 * ff * d;
    active += every + top_k * 3 * ff * d;
  }
  const plan::Plan p = plan_for(dir);
  EXPECT_EQ(u(json(p.shapes.total_parameters)), total);
  EXPECT_EQ(u(json(p.shapes.active_parameters)), active);
  EXPECT_NEAR(static_cast<double>(p.shapes.total_parameters) / 1e9, 671, 0.5);
  EXPECT_NEAR(static_cast<double>(p.shapes.active_parameters) / 1e9, 37, 0.5);
  EXPECT_TRUE(p.shapes.not_servable.has_value());
  bool mtp_note = false;
  for (const auto& n : p.shapes.notes) mtp_note |= n.find("multi-token-prediction") != std::string::npos;
  EXPECT_TRUE(mtp_note);
  // fp8 is config.json's own format, not modelled: the plan sizes bf16 and says so.
  EXPECT_FALSE(p.shapes.configured.has_value());
  EXPECT_EQ(p.shapes.selected_format()->format.name(), "bf16");
}

// The published counts of the other real configs, and gpt-oss-20b's declared total to the byte.
TEST(PlanShapeWeights, PublishedParameterCounts) {
  struct Published {
    const char* config;
    double total_b, active_b, tolerance_b;
  };
  for (const Published& m : {Published{"gpt-oss-20b", 20.9, 3.6, 0.05}, Published{"gpt-oss-120b", 116.8, 5.1, 0.05},
                             Published{"Llama-3.3-70B-Instruct", 70.55, 70.55, 1.1},
                             Published{"gemma-4-26B-A4B", 26, 4, 0.8}}) {
    SCOPED_TRACE(m.config);
    const plan::Plan p = plan_for(configs() / m.config);
    EXPECT_NEAR(static_cast<double>(p.shapes.total_parameters) / 1e9, m.total_b, m.tolerance_b);
    EXPECT_NEAR(static_cast<double>(p.shapes.active_parameters) / 1e9, m.active_b, m.tolerance_b);
  }
  const plan::Plan oss = plan_for(configs() / "gpt-oss-20b");
  EXPECT_EQ(oss.shapes.matches_files, true) << oss.shapes.files_check;
  EXPECT_EQ(format_row(oss, "mxfp4").bytes, 13761264768u);
  EXPECT_EQ(format_row(oss, "mxfp4").active_bytes, 3708089088u);
  // keel reads gpt-oss experts only as MXFP4; Gemma 4's stacked experts only unquantized.
  EXPECT_FALSE(format_row(oss, "mxfp4").not_loadable.has_value());
  ASSERT_TRUE(format_row(oss, "bf16").not_loadable.has_value());
  EXPECT_NE(format_row(oss, "bf16").not_loadable->find("experts.gate_up_proj"), std::string::npos);
  const plan::Plan gemma = plan_for(configs() / "gemma-4-26B-A4B");
  EXPECT_FALSE(format_row(gemma, "bf16").not_loadable.has_value());
  EXPECT_TRUE(format_row(gemma, "mlx4-g64").not_loadable.has_value());
  bool tower_note = false;
  for (const auto& n : gemma.shapes.notes) tower_note |= n.find("vision tower (vision_config)") != std::string::npos;
  EXPECT_TRUE(tower_note);
}

// Decode tok/s is bandwidth / active bytes, from keel bench's cached measurement; without one
// there is no estimate, and a malformed cache is ignored rather than trusted.
TEST(PlanShapeWeights, DecodeEstimateFromTheCachedBandwidth) {
  CacheDir cache;
  const fs::path dir = configs() / "Qwen3-30B-A3B";
  EXPECT_FALSE(plan_for(dir).shapes.selected_format()->decode_tokens_per_s.has_value());
  ASSERT_TRUE(plan::store_measured_bandwidth(100e9).has_value());
  const plan::Plan p = plan_for(dir);
  const plan::FormatWeights& f = *p.shapes.selected_format();
  ASSERT_TRUE(f.decode_tokens_per_s.has_value());
  EXPECT_DOUBLE_EQ(*f.decode_tokens_per_s, 100e9 / static_cast<double>(f.active_bytes));
  EXPECT_NE(plan::format_plan_text(p).find("100.0 GB/s"), std::string::npos);
  std::ofstream(cache.path() / "machine_limits.json") << "{\"read_bandwidth_bytes_per_s\": \"fast\"}";
  EXPECT_FALSE(plan::read_measured_bandwidth().has_value());
}

TEST(PlanShapeWeights, WeightsFlagNames) {
  EXPECT_EQ(plan::parse_storage_format("mlx4").name(), "mlx4-g64");
  EXPECT_EQ(plan::parse_storage_format("mlx8-g128").name(), "mlx8-g128");
  EXPECT_EQ(plan::parse_storage_format("mxfp4").name(), "mxfp4");
  EXPECT_EQ(plan::parse_storage_format("f16").name(), "f16");
  try {
    plan::parse_storage_format("Q4_K_M");
    ADD_FAILURE() << "GGUF accepted";
  } catch (const keel::Error& e) {
    EXPECT_NE(std::string(e.what()).find("plan the .gguf file itself"), std::string::npos) << e.what();
  }
  EXPECT_THROW(plan::parse_storage_format("mlx3"), keel::Error);
  EXPECT_THROW(plan::parse_storage_format("mlx4-g16"), keel::Error);
}

// --json carries it all; the parameter keys say "param" and "total" / "active".
TEST(PlanShapeWeights, JsonCarriesFormatsAndParameters) {
  const json j = plan::plan_to_json(plan_for(configs() / "gpt-oss-120b"));
  const json& s = j["shapes"];
  EXPECT_NEAR(s["total_parameters"].get<double>() / 1e9, 116.8, 0.05);
  EXPECT_NEAR(s["active_parameters_per_token"].get<double>() / 1e9, 5.1, 0.05);
  EXPECT_EQ(s["selected_format"], "mxfp4");
  EXPECT_EQ(s["formats"].size(), 8u);  // bf16, six MLX, mxfp4
  EXPECT_EQ(s["keel_serves"], true);
  EXPECT_NE(s["gguf"].get<std::string>().find("plan the .gguf file itself"), std::string::npos);
  EXPECT_EQ(j["weights"]["bytes"], s["formats"][7]["total_bytes"]);
  EXPECT_TRUE(j["weights"]["files_bytes"].is_null());
}
