// keel synth writing GGUF (arch/synth.h synthesize_gguf, `keel synth --out FILE.gguf`): a GGUF and
// a folder of the same seed hold the same weights, so keel computes the same logits from both,
// for qwen2 (rows as in the checkpoint), qwen3 (q/k norms, explicit head size), llama (q/k rows
// permuted for interleaved rope, undone by keel's interleaved rope) and qwen3_moe (per-expert
// matrices stacked into ffn_{gate,up,down}_exps); the tokenizer and chat
// template written into the file are the folder's; what GGUF output does not cover is refused.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "keel/arch/model_loader.h"
#include "keel/arch/synth.h"
#include "keel/arch/transformer.h"
#include "keel/chat/gguf_template.h"
#include "keel/chat/template_files.h"
#include "keel/engine/forward_loop.h"
#include "keel/engine/standalone_sequence.h"
#include "keel/model/gguf_file.h"
#include "keel/text/gguf_tokenizer.h"
#include "keel/text/tokenizer.h"
#include "keel/util/error.h"
#include "logits_support.h"
#include "test_support.h"

namespace keel {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using test::all_logits;

// GGUF stores rms_norm_eps and rope_theta as f32, so the configs use values an f32 holds exactly
// (2^-20 and 10000): any other value would differ between the two by design, not by a bug.
json tiny_config(const std::string& model_type) {
  json c = {{"model_type", model_type},
            {"hidden_size", 64},
            {"num_hidden_layers", 2},
            {"num_attention_heads", 4},
            {"num_key_value_heads", 2},
            {"intermediate_size", 96},
            {"vocab_size", 300},
            {"max_position_embeddings", 256},
            {"rms_norm_eps", 9.5367431640625e-07},
            {"rope_theta", 10000.0},
            {"tie_word_embeddings", true}};
  return c;
}

fs::path write_config(const fs::path& dir, const json& config) {
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << config.dump(2);
  return dir / "config.json";
}

// Synthesizes `config` both ways with one seed and returns the largest logit difference.
double folder_vs_gguf(const json& config, WeightFormat format, bool expect_interleaved) {
  test::TempDir tmp;
  const fs::path cfg = write_config(tmp.path() / "src", config);
  SynthOptions o;
  o.format = format;
  o.seed = 7;
  synthesize_model(cfg, tmp.path() / "folder", o);
  synthesize_gguf(cfg, tmp.path() / "model.gguf", o);
  const ModelWeights folder = arch::load_model(tmp.path() / "folder");
  const ModelWeights gguf = arch::load_model(tmp.path() / "model.gguf");
  EXPECT_TRUE(gguf.from_gguf());
  EXPECT_EQ(gguf.spec.layers.front().rope.interleaved, expect_interleaved);
  EXPECT_EQ(gguf.spec.hidden_size, folder.spec.hidden_size);
  EXPECT_EQ(gguf.spec.vocab_size, folder.spec.vocab_size);
  EXPECT_EQ(gguf.spec.tie_word_embeddings, folder.spec.tie_word_embeddings);
  EXPECT_EQ(gguf.spec.layers.front().head_dim, folder.spec.layers.front().head_dim);
  EXPECT_EQ(gguf.spec.layers.front().qkv_bias, folder.spec.layers.front().qkv_bias);
  EXPECT_EQ(gguf.spec.layers.front().qk_norm, folder.spec.layers.front().qk_norm);
  const std::vector<int32_t> tokens = {1, 17, 250, 3, 99, 42, 42, 7, 299, 0, 128, 64};
  const auto a = all_logits(folder, tokens), b = all_logits(gguf, tokens);
  EXPECT_EQ(a.size(), b.size());
  double worst = 0, largest = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
    largest = std::max(largest, std::abs(static_cast<double>(a[i])));
  }
  EXPECT_GT(largest, 0.0);  // the model computes something
  std::printf("[ synth    ] %s: largest logit %.3g, largest difference %.3g\n", config["model_type"].get<std::string>().c_str(),
              largest, worst);
  return worst;
}

TEST(SynthGguf, Qwen2Bf16IsBitIdenticalToItsFolder) {
  json c = tiny_config("qwen2");  // qwen2: q/k/v biases, tied embeddings, rows as in the checkpoint
  EXPECT_EQ(folder_vs_gguf(c, WeightFormat::BF16, false), 0.0);
}

TEST(SynthGguf, Qwen3F32IsBitIdenticalToItsFolder) {
  json c = tiny_config("qwen3");
  c["head_dim"] = 32;  // not hidden / heads: written as attention.key_length
  c["tie_word_embeddings"] = false;
  EXPECT_EQ(folder_vs_gguf(c, WeightFormat::F32, false), 0.0);
}

TEST(SynthGguf, LlamaQkPermutationRoundTrips) {
  json c = tiny_config("llama");
  c["tie_word_embeddings"] = false;  // output.weight written
  // q/k rows permuted per head for interleaved rope; without the permutation the logits (about
  // 0.3) move by 2e-4 to 1e-3 here. The rotated pairs are the same numbers in both, but q.k sums
  // them in another order, so rounding may differ (it does not for these bf16 weights).
  EXPECT_LT(folder_vs_gguf(c, WeightFormat::BF16, true), 1e-6);
  c["attention_bias"] = true;  // q/k biases permuted the same way
  EXPECT_LT(folder_vs_gguf(c, WeightFormat::F16, true), 1e-6);
}

TEST(SynthGguf, Qwen3MoeStacksTheFoldersExperts) {
  json c = tiny_config("qwen3_moe");
  c["num_experts"] = 4, c["num_experts_per_tok"] = 2, c["moe_intermediate_size"] = 32, c["norm_topk_prob"] = true;
  c["tie_word_embeddings"] = false;
  EXPECT_EQ(folder_vs_gguf(c, WeightFormat::BF16, false), 0.0);
  // The stacks are in llama.cpp's order: (cols, rows, experts) innermost first.
  test::TempDir tmp;
  SynthOptions o;
  synthesize_gguf(write_config(tmp.path() / "src", c), tmp.path() / "m.gguf", o);
  const gguf::File file(tmp.path() / "m.gguf");
  const gguf::Tensor* down = file.header().find_tensor("blk.1.ffn_down_exps.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->dims, (std::vector<int64_t>{32, 64, 4}));
  EXPECT_EQ(file.optional_int("qwen3moe.expert_feed_forward_length"), 32);
  EXPECT_EQ(file.optional_int("qwen3moe.expert_used_count"), 2);
}

TEST(SynthGguf, RefusesWhatItDoesNotWrite) {
  test::TempDir tmp;
  auto refusal = [&](const json& config, WeightFormat format) {
    const fs::path cfg = write_config(tmp.path() / "src", config);
    SynthOptions o;
    o.format = format;
    try {
      synthesize_gguf(cfg, tmp.path() / "x.gguf", o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(refusal(tiny_config("qwen2"), WeightFormat::MLX4).find("MLX weights have no GGUF form"), std::string::npos);
  json moe = tiny_config("qwen3_moe");
  moe["num_experts"] = 4, moe["num_experts_per_tok"] = 2, moe["moe_intermediate_size"] = 32;
  moe["norm_topk_prob"] = false;  // llama.cpp's qwen3moe always renormalizes
  EXPECT_NE(refusal(moe, WeightFormat::BF16).find("keel synth: qwen3_moe: experts other than routed SwiGLU"),
            std::string::npos)
      << refusal(moe, WeightFormat::BF16);
  moe["norm_topk_prob"] = true;
  moe["mlp_only_layers"] = {1};
  EXPECT_NE(refusal(moe, WeightFormat::BF16).find("dense FFNs beside expert layers"), std::string::npos)
      << refusal(moe, WeightFormat::BF16);
  json scaled = tiny_config("llama");
  scaled["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  EXPECT_NE(refusal(scaled, WeightFormat::BF16).find("rope scaling"), std::string::npos);
}

// The CLI: --out FILE.gguf with --tokenizer writes a tokenizer that encodes like tokenizer.json,
// padded to the embedding's rows, and the folder's chat template with its bos/eos texts.
TEST(SynthGguf, CliWritesTheTokenizerAndTemplate) {
  test::TempDir tmp;
  json c = tiny_config("qwen2");
  c["vocab_size"] = 1700;  // more rows than tiny-toolcaller's 1661 tokens
  const fs::path cfg = write_config(tmp.path() / "src", c);
  const fs::path tok_dir = test::shared_dir() / "models" / "tiny-toolcaller";
  const fs::path out = tmp.path() / "m.gguf";
  const auto r = test::run_command(test::keel_binary().string() + " synth --config " + cfg.string() + " --out " +
                                   out.string() + " --tokenizer " + tok_dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const gguf::File file(out);
  const auto g = text::load_gguf_tokenizer(file);
  EXPECT_EQ(g.pre, "qwen2");
  EXPECT_EQ(g.tokenizer.vocab_size(), 1700u);
  EXPECT_EQ(g.tokenizer.token_text(1699), "[PAD1699]");
  const auto json_tok = text::Tokenizer::from_file(tok_dir);
  for (const char* t : {"<|im_start|>user\nWhat's 2+2?<|im_end|>\n<tool_call>{\"a\": 1}</tool_call>", "héllo  wörld\n\n",
                        "def f(x):\n    return x"})
    EXPECT_EQ(g.tokenizer.encode(t), json_tok.encode(t)) << t;
  EXPECT_EQ(g.special.eos, json_tok.token_id("<|im_end|>"));
  const auto src = chat::gguf_chat_template_source(file);
  EXPECT_EQ(src.source, chat::load_chat_template_source(tok_dir).source);
  EXPECT_EQ(src.eos_token, "<|im_end|>");
  // The weights load too, and --tokenizer is refused for a folder.
  EXPECT_EQ(arch::load_model(out).spec.vocab_size, 1700);
  const auto bad = test::run_command(test::keel_binary().string() + " synth --config " + cfg.string() + " --out " +
                                     (tmp.path() / "dir").string() + " --tokenizer " + tok_dir.string());
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--tokenizer goes with an --out ending in .gguf"), std::string::npos) << bad.output;
  const auto none = test::run_command(test::keel_binary().string() + " synth --config " + cfg.string() + " --out " +
                                      (tmp.path() / "n.gguf").string());
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.output.find("a GGUF needs a tokenizer"), std::string::npos) << none.output;
}

}  // namespace
}  // namespace keel
