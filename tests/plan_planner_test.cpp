// The planner's verdicts: totals, the largest context under a ceiling, auto's choice of preset,
// the recommendation, and the refusal serve will give.
#include <gtest/gtest.h>

#include "keel/arch/model_source.h"
#include "keel/engine/served_model.h"
#include "keel/model/gguf_file.h"
#include "keel/model/gguf_writer.h"
#include "keel/plan/kv_bytes.h"
#include "keel/plan/memory_ceiling.h"
#include "keel/plan/number_format.h"
#include "keel/plan/planner.h"
#include "keel/toolcall/format_detect.h"
#include "keel/util/error.h"
#include "test_support.h"

namespace plan = keel::plan;
using plan::KvPreset;

namespace {

plan::Plan plan_for(const std::string& config, double memory_gib, std::optional<int64_t> context = std::nullopt,
                    KvPreset policy = KvPreset::Auto) {
  plan::PlanRequest r;
  r.memory_gib = memory_gib;
  r.context = context;
  r.policy = policy;
  return plan::plan_model(keel::arch::resolve_model(keel::test::shared_dir() / "fixtures/configs" / config), r);
}

constexpr uint64_t kGiB = 1ull << 30;

}  // namespace

TEST(PlanPlanner, Qwen3_14B_Mlx4OnA16GiBCeiling) {
  auto p = plan_for("Qwen3-14B-MLX-4bit", 16);
  EXPECT_EQ(p.ceiling.bytes, 16 * kGiB);
  EXPECT_EQ(p.ceiling.source, "--memory 16 GiB");
  EXPECT_TRUE(p.context_is_model_max);
  EXPECT_EQ(p.context, 40960);
  const uint64_t base = 8307783680u + p.scratch.total();
  // Full bf16 at 40,960 tokens: 163,840 x 40,960 = 6.25 GiB of KV; 7.74 GiB weights: fits in 16.
  const auto& full = p.preset(KvPreset::Full);
  EXPECT_EQ(full.kv_bytes, 163840ull * 40960);
  EXPECT_EQ(*full.total_bytes, base + full.kv_bytes);
  EXPECT_TRUE(*full.fits);
  EXPECT_EQ(p.chosen, KvPreset::Full);
  EXPECT_EQ(p.recommendation.policy, KvPreset::Full);
  // Capped at the model's maximum, not at what memory would allow.
  EXPECT_EQ(*full.largest_context, 40960);
}

TEST(PlanPlanner, LargestContextIsWhatTheCeilingLeavesOverPerToken) {
  // At 12 GiB the full-precision cache of Qwen3-14B (MLX 4-bit weights, 7.74 GiB) runs out before
  // the model's maximum of 40,960 tokens; int8 does not.
  auto p = plan_for("Qwen3-14B-MLX-4bit", 12);
  const uint64_t left = 12 * kGiB - 8307783680u - p.scratch.total();
  // The pool stores whole blocks of 16 tokens.
  EXPECT_EQ(*p.preset(KvPreset::Full).largest_context, static_cast<int64_t>(left / (16 * 163840) * 16));
  EXPECT_EQ(*p.preset(KvPreset::Int8).largest_context, std::min<int64_t>(40960, left / (2 * 40 * 8 * 136)));
  // auto takes the most precise preset that holds the 40,960 tokens asked for.
  EXPECT_FALSE(*p.preset(KvPreset::Full).fits);
  EXPECT_EQ(p.chosen, KvPreset::Int8);
  EXPECT_EQ(plan::kv_budget_bytes(p), left);
  EXPECT_LE(p.preset(KvPreset::Int8).kv_bytes, left);
  EXPECT_NE(p.recommendation.text.find("--kv-policy int8 --context 40960"), std::string::npos) << p.recommendation.text;
}

TEST(PlanPlanner, ProtectAddsItsBf16WindowToTheInt4Bulk) {
  auto p = plan_for("Qwen3-14B-MLX-4bit", 64, 32768);
  // What the pool holds at its peak, one token short of 32,768 (kv_footprint.h): 34 blocks x 16
  // tokens x 163,840 at bf16 (the sinks' block, the 17 blocks holding the last 256 tokens, and the
  // 16 before them that a branch inside the window re-reads) + 2,030 blocks x 16 tokens x
  // (2 x 40 x 8 x 80 = 51,200) at int4 (the 16 branch blocks in both forms).
  EXPECT_EQ(p.preset(KvPreset::Protect).kv_bytes, 544ull * 163840 + 32480ull * 51200);
  // int4: the last, incomplete block is still bf16.
  EXPECT_EQ(p.preset(KvPreset::Int4).kv_bytes, 32752ull * 51200 + 16ull * 163840);
}

TEST(PlanPlanner, NothingFitsTheRequestedContext) {
  // 8.5 GiB: the weights (7.74 GiB) fit, 40,960 tokens do not under any preset.
  auto p = plan_for("Qwen3-14B-MLX-4bit", 8.5);
  EXPECT_FALSE(p.chosen.has_value());
  EXPECT_EQ(p.recommendation.policy, KvPreset::Protect);
  EXPECT_LT(p.recommendation.context, 40960);
  EXPECT_GT(p.recommendation.context, 0);
  EXPECT_NE(p.recommendation.text.find("no preset holds 40,960 tokens"), std::string::npos) << p.recommendation.text;
  try {
    plan::require_fit(p);
    FAIL() << "serve must refuse this configuration";
  } catch (const keel::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("no preset holds"), std::string::npos);
    EXPECT_NE(msg.find("KV bytes per token"), std::string::npos);  // the plan is in the message
  }
}

TEST(PlanPlanner, WeightsAloneTooLarge) {
  auto p = plan_for("medgemma-27b-it-gemma3", 32);  // 51.1 GiB of bf16 weights
  EXPECT_FALSE(p.chosen.has_value());
  EXPECT_FALSE(p.recommendation.policy.has_value());
  EXPECT_NE(p.recommendation.text.find("does not fit: weights (51.1 GiB)"), std::string::npos) << p.recommendation.text;
  EXPECT_EQ(*p.preset(KvPreset::Int4).largest_context, 0);
  EXPECT_EQ(plan::kv_budget_bytes(p), 0u);
  EXPECT_THROW(plan::require_fit(p), keel::Error);
}

TEST(PlanPlanner, ARequestedPresetThatDoesNotFitPointsToOneThatDoes) {
  auto p = plan_for("Qwen3-14B-MLX-4bit", 12, std::nullopt, KvPreset::Full);
  EXPECT_FALSE(p.chosen.has_value());
  EXPECT_EQ(p.recommendation.policy, KvPreset::Int8);
  EXPECT_NE(p.recommendation.text.find("full holds at most"), std::string::npos) << p.recommendation.text;
}

// A config keel has no tensor list for (DeepSeek-V3.2's sparse-attention indexer) and no files.
TEST(PlanPlanner, UnknownWeightsGiveKvButNoVerdict) {
  auto p = plan_for("DeepSeek-V3.2", 128, 32768);
  EXPECT_FALSE(p.weights.bytes.has_value());
  EXPECT_FALSE(p.weight_bytes.has_value());
  EXPECT_GT(p.preset(KvPreset::Full).kv_bytes, 0u);
  EXPECT_FALSE(p.preset(KvPreset::Full).fits.has_value());
  EXPECT_FALSE(p.chosen.has_value());
  EXPECT_NE(p.recommendation.text.find("weight bytes are unknown"), std::string::npos);
  EXPECT_FALSE(plan::kv_budget_bytes(p).has_value());
  EXPECT_THROW(plan::require_fit(p), keel::Error);
}

// No weight files: the verdict comes from config.json's shapes (bf16, 131.4 GiB for Llama-3.3-70B).
TEST(PlanPlanner, ConfigOnlyFolderGetsAVerdictFromItsShapes) {
  auto p = plan_for("Llama-3.3-70B-Instruct", 140, 32768);
  EXPECT_FALSE(p.weights.bytes.has_value());
  EXPECT_EQ(p.weight_bytes, 141107412992u);
  EXPECT_EQ(p.preset(KvPreset::Full).kv_bytes, 327680ull * 32768);  // 10 GiB
  EXPECT_EQ(p.preset(KvPreset::Full).fits, false);  // 131.4 + 10 + scratch > 140; int8's 5.3 fit
  EXPECT_EQ(p.chosen, KvPreset::Int8);
}

TEST(PlanPlanner, ContextBeyondTheModelMaximumIsFlagged) {
  auto p = plan_for("Qwen3-8B", 64, 65536);
  bool flagged = false;
  for (const auto& w : p.warnings) flagged |= w.find("beyond the model's max_position_embeddings (40,960)") != std::string::npos;
  EXPECT_TRUE(flagged);
}

TEST(PlanPlanner, ChatTemplateGivenOnTheSide) {
  plan::PlanRequest r;
  r.memory_gib = 32;
  r.chat_template = keel::test::shared_dir() / "fixtures/chat_templates/openai-gpt-oss-120b.jinja";
  // A config file works too.
  const auto model = keel::arch::resolve_model(keel::test::shared_dir() / "fixtures/configs/gpt-oss-20b/config.json");
  auto p = plan::plan_model(model, r);
  ASSERT_TRUE(p.gates.template_source.has_value());
  EXPECT_EQ(p.gates.tool_calls.name, "harmony");
  EXPECT_TRUE(p.gates.tool_calls_usable());
  EXPECT_EQ(p.gates.reasoning.kind, keel::toolcall::ReasoningKind::AlwaysOn);
  // 12.8 GiB of weights + 3.0 GiB of KV at 131,072 tokens: full precision fits in 32 GiB.
  EXPECT_EQ(p.chosen, KvPreset::Full);
}

TEST(PlanPlanner, TinyToolcallerFolderIsComplete) {
  plan::PlanRequest r;
  r.memory_gib = 1;
  auto p = plan::plan_model(keel::arch::resolve_model(keel::test::shared_dir() / "models/tiny-toolcaller"), r);
  EXPECT_EQ(p.weights.bytes, 6757376u);
  EXPECT_EQ(p.gates.template_source, "tokenizer_config.json");
  EXPECT_EQ(p.gates.tool_calls.name, "hermes");
  EXPECT_EQ(p.chosen, KvPreset::Full);
  // 4 layers x 2 KV heads x 64: 2 x 4 x 2 x 64 x 2 = 2,048 bytes per token.
  EXPECT_EQ(plan::growing_bytes_per_token(p.layout, keel::KvFormat::BF16), 2048);
}

// keel plan and keel serve read the same chat template from a GGUF file, so they name the same
// tool-call format: on every GGUF fixture, and on one whose tool_use variant differs from its
// default template (serve renders every request with the variant).
TEST(PlanPlanner, PlanAndServeReadTheSameTemplateFromEveryGguf) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(keel::test::shared_dir() / "models/gguf"))
    if (e.path().extension() == ".gguf") files.push_back(e.path());
  ASSERT_FALSE(files.empty());

  // A copy of the first fixture with a Hermes tool_use variant beside a default without calls.
  keel::test::TempDir dir;
  {
    const keel::gguf::File source(files.front());
    keel::gguf::Writer w;
    for (const auto& [key, value] : source.header().metadata)
      if (!key.starts_with("tokenizer.chat_template")) w.set(key, value);
    w.set_string("tokenizer.chat_template", "{% for m in messages %}{{ m.content }}{% endfor %}");
    w.set_string("tokenizer.chat_template.tool_use",
                 "{% for m in messages %}{{ m.content }}{% endfor %}{% if tools %}<tool_call>{% endif %}");
    for (const auto& t : source.header().tensors) {
      const auto data = source.data(t);
      w.add_tensor(t.name, t.dims, t.type->id, std::string(data.begin(), data.end()));
    }
    files.push_back(dir.path() / "with-tool-use.gguf");
    w.write(files.back());
  }

  for (const auto& file : files) {
    SCOPED_TRACE(file.filename().string());
    const keel::arch::ModelSource model = keel::arch::resolve_model(file);
    plan::PlanRequest r;
    r.memory_gib = 1;
    const auto p = plan::plan_model(model, r);
    std::unique_ptr<keel::ServedModel> served;
    try {
      served = std::make_unique<keel::ServedModel>(model, keel::ServedModelOptions{.threads = 1});
    } catch (const keel::Error& e) {
      EXPECT_FALSE(p.gates.template_source.has_value()) << "serve refuses the model, plan finds a template: " << e.what();
      continue;
    }
    EXPECT_EQ(p.gates.template_source, model.require_chat_template().origin);
    EXPECT_EQ(p.gates.tool_calls.format, served->tool_call_format().format);
    if (file == files.back()) { EXPECT_EQ(served->tool_call_format().name, std::string("hermes")); }
  }
}

TEST(PlanMemoryCeiling, FromMeminfoAndCgroup) {
  const std::string meminfo = "MemTotal:       16384000 kB\nMemFree:  1000 kB\n";
  auto c = plan::ceiling_from_meminfo(meminfo, std::nullopt);
  EXPECT_EQ(c.bytes, static_cast<uint64_t>(16384000.0 * 1024 * 0.75));
  EXPECT_NE(c.source.find("75% of 15.6 GiB RAM (/proc/meminfo MemTotal"), std::string::npos) << c.source;
  auto limited = plan::ceiling_from_meminfo(meminfo, 4 * kGiB);
  EXPECT_EQ(limited.bytes, 3 * kGiB);
  EXPECT_NE(limited.source.find("cgroup memory limit"), std::string::npos);
  EXPECT_THROW(plan::ceiling_from_meminfo("MemFree: 10 kB\n", std::nullopt), keel::Error);
  EXPECT_THROW(plan::ceiling_from_flag(-1), keel::Error);
  EXPECT_EQ(plan::ceiling_from_flag(0.5).bytes, kGiB / 2);
  // This machine: a positive number and a source that says where it came from.
  auto here = plan::machine_ceiling(std::nullopt);
  EXPECT_GT(here.bytes, 0u);
  EXPECT_FALSE(here.source.empty());
}
