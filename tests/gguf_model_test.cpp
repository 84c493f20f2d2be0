// GGUF models through the one loader (arch/gguf_model.h): the metadata fills the same ModelSpec
// config.json does, the tensors the same weights, and a GGUF of a Hugging Face checkpoint computes
// what the folder computes. Broken or unsupported files are refused naming the key or tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "keel/arch/gguf_model.h"
#include "keel/arch/model_loader.h"
#include "keel/arch/transformer.h"
#include "keel/engine/forward_loop.h"
#include "keel/engine/standalone_sequence.h"
#include "keel/kv/kv_disk_identity.h"
#include "keel/model/gguf_writer.h"
#include "keel/ops/elementwise.h"
#include "keel/plan/planner.h"
#include "keel/util/error.h"
#include "logits_support.h"
#include "test_support.h"

namespace keel {
namespace {

std::filesystem::path shared(const std::string& rel) { return test::shared_dir() / rel; }

using test::all_logits;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(GgufModel, LlamaFileComputesWhatItsHuggingFaceFolderComputes) {
  // stories260K: llama.cpp's GGUF (q/k rows permuted for interleaved rope) and the same weights as
  // a Hugging Face folder. Every logit must agree: the permutation is undone by the rope, not lost.
  const ModelWeights gguf = arch::load_model(shared("fixtures/models/stories260K/stories260K.gguf"));
  const ModelWeights hf = arch::load_model(shared("models/stories260K-hf"));
  ASSERT_TRUE(gguf.from_gguf());
  EXPECT_TRUE(gguf.spec.layers.front().rope.interleaved);
  EXPECT_FALSE(hf.spec.layers.front().rope.interleaved);
  const std::vector<int32_t> tokens = {1, 403, 407, 261, 378, 429, 267, 422, 305, 440, 300, 289, 495, 319, 276, 46};
  const auto a = all_logits(gguf, tokens), b = all_logits(hf, tokens);
  ASSERT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  EXPECT_LT(worst, 1e-4);
  EXPECT_EQ(gguf.eos_token_ids, std::vector<int32_t>{2});
}

void expect_same_shape(const ModelSpec& g, const ModelSpec& h) {
  EXPECT_EQ(g.model_type, h.model_type);
  EXPECT_EQ(g.hidden_size, h.hidden_size);
  EXPECT_EQ(g.num_layers, h.num_layers);
  EXPECT_EQ(g.vocab_size, h.vocab_size);
  EXPECT_EQ(g.max_position, h.max_position);
  EXPECT_EQ(g.tie_word_embeddings, h.tie_word_embeddings);
  EXPECT_NEAR(g.norm_eps, h.norm_eps, 1e-12 + 1e-6 * h.norm_eps);  // f32 in GGUF
  ASSERT_EQ(g.layers.size(), h.layers.size());
  for (size_t i = 0; i < g.layers.size(); ++i) {
    const LayerSpec &a = g.layers[i], &b = h.layers[i];
    EXPECT_EQ(a.attention, b.attention) << i;
    EXPECT_EQ(a.window, b.window) << i;
    EXPECT_EQ(a.num_heads, b.num_heads) << i;
    EXPECT_EQ(a.num_kv_heads, b.num_kv_heads) << i;
    EXPECT_EQ(a.head_dim, b.head_dim) << i;
    EXPECT_EQ(a.rope.theta, b.rope.theta) << i;
    EXPECT_EQ(a.rope.scaling.kind, b.rope.scaling.kind) << i;
    EXPECT_EQ(a.rope.scaling.factor, b.rope.scaling.factor) << i;
    EXPECT_EQ(a.rope.scaling.original_max_position, b.rope.scaling.original_max_position) << i;
    EXPECT_EQ(a.qkv_bias, b.qkv_bias) << i;
    EXPECT_EQ(a.o_bias, b.o_bias) << i;
    EXPECT_EQ(a.attention_sinks, b.attention_sinks) << i;
    EXPECT_EQ(a.ffn_dim, b.ffn_dim) << i;
    ASSERT_EQ(a.moe.has_value(), b.moe.has_value()) << i;
    if (a.moe) {
      EXPECT_EQ(a.moe->experts, b.moe->experts);
      EXPECT_EQ(a.moe->experts_per_token, b.moe->experts_per_token);
      EXPECT_EQ(a.moe->expert_ffn_dim, b.moe->expert_ffn_dim);
      EXPECT_EQ(a.moe->softmax_after_topk, b.moe->softmax_after_topk);
      EXPECT_EQ(a.moe->biases, b.moe->biases);
      EXPECT_EQ(a.moe->swiglu_limit, b.moe->swiglu_limit);
    }
  }
}

TEST(GgufModel, MetadataFillsTheSpecConfigJsonDoes) {
  {
    const ModelSpec g = arch::runnable_spec(arch::resolve_model(shared("models/gguf/tiny-toolcaller-Q8_0.gguf")));
    const ModelSpec h = arch::runnable_spec(ConfigView::load(shared("models/tiny-toolcaller/config.json")));
    expect_same_shape(g, h);
  }
  {
    const ModelSpec g = arch::runnable_spec(arch::resolve_model(shared("models/gguf/tiny-gptoss-random-MXFP4.gguf")));
    const ModelSpec h = arch::runnable_spec(ConfigView::load(shared("models/tiny-gptoss-random/config.json")));
    expect_same_shape(g, h);
    // The one difference GGUF cannot express: llama.cpp always rounds YaRN's correction range.
    EXPECT_TRUE(g.layers.front().rope.scaling.truncate);
    EXPECT_FALSE(h.layers.front().rope.scaling.truncate);
  }
}

// A one-layer llama GGUF of random F32 weights (dim 32, 2 heads, ffn 64, vocab 16); `edit` may
// change the writer's tensors or keys before the file is written.
std::filesystem::path tiny_llama(const std::filesystem::path& dir, uint32_t q_type = 0, bool drop_ffn_down = false,
                                 const std::vector<float>& rope_factors = {}) {
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  w.set_uint32("llama.embedding_length", 32);
  w.set_uint32("llama.block_count", 1);
  w.set_uint32("llama.feed_forward_length", 64);
  w.set_uint32("llama.attention.head_count", 2);
  w.set_uint32("llama.attention.head_count_kv", 2);
  w.set_uint32("llama.context_length", 128);
  w.set_float32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  auto f32 = [&](std::vector<int64_t> dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::string bytes(static_cast<size_t>(n) * 4, '\0');
    for (int64_t i = 0; i < n; ++i) {
      const float v = normal(rng);
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    }
    return bytes;
  };
  w.add_tensor("token_embd.weight", {32, 16}, 0, f32({32, 16}));
  w.add_tensor("output_norm.weight", {32}, 0, f32({32}));
  w.add_tensor("blk.0.attn_norm.weight", {32}, 0, f32({32}));
  w.add_tensor("blk.0.ffn_norm.weight", {32}, 0, f32({32}));
  if (q_type == 3)  // Q4_1: 20 bytes per 32
    w.add_tensor("blk.0.attn_q.weight", {32, 32}, 3, std::string(32 * 20, '\0'));
  else
    w.add_tensor("blk.0.attn_q.weight", {32, 32}, 0, f32({32, 32}));
  for (const char* n : {"blk.0.attn_k.weight", "blk.0.attn_v.weight", "blk.0.attn_output.weight"})
    w.add_tensor(n, {32, 32}, 0, f32({32, 32}));
  w.add_tensor("blk.0.ffn_gate.weight", {32, 64}, 0, f32({32, 64}));
  w.add_tensor("blk.0.ffn_up.weight", {32, 64}, 0, f32({32, 64}));
  if (!drop_ffn_down) w.add_tensor("blk.0.ffn_down.weight", {64, 32}, 0, f32({64, 32}));
  if (!rope_factors.empty()) {
    std::string bytes(rope_factors.size() * 4, '\0');
    std::memcpy(bytes.data(), rope_factors.data(), bytes.size());
    w.add_tensor("rope_freqs.weight", {static_cast<int64_t>(rope_factors.size())}, 0, bytes);
  }
  const auto path = dir / "tiny.gguf";
  w.write(path);
  return path;
}

TEST(GgufModel, UnsupportedAndMissingTensorsAreRefusedByName) {
  test::TempDir dir;
  EXPECT_NO_THROW(arch::load_model(tiny_llama(dir.path())));
  // A folder holding one GGUF model (and no config.json) is that model.
  EXPECT_TRUE(arch::load_model(dir.path()).from_gguf());
  std::string e = error_of([&] { arch::load_model(tiny_llama(dir.path(), /*q_type=*/3)); });
  EXPECT_NE(e.find("tiny.gguf: tensor 'blk.0.attn_q.weight': type Q4_1 is not supported"), std::string::npos) << e;
  e = error_of([&] { arch::load_model(tiny_llama(dir.path(), 0, /*drop_ffn_down=*/true)); });
  EXPECT_NE(e.find("tensor 'blk.0.ffn_down.weight' is missing"), std::string::npos) << e;
}

TEST(GgufModel, UnknownArchitecturesAndBadKeysAreRefusedByName) {
  test::TempDir dir;
  {
    gguf::Writer w;
    w.set_string("general.architecture", "mamba");
    w.write(dir.path() / "m.gguf");
    const std::string e = error_of([&] { arch::load_model(dir.path() / "m.gguf"); });
    EXPECT_NE(e.find("key 'general.architecture': 'mamba' is not supported (supported: "), std::string::npos) << e;
  }
  {
    gguf::Writer w;
    w.set_string("general.architecture", "qwen2");
    w.set_string("qwen2.block_count", "four");
    w.write(dir.path() / "m.gguf");
    const std::string e = error_of([&] { arch::load_model(dir.path() / "m.gguf"); });
    EXPECT_NE(e.find("key 'qwen2.embedding_length'"), std::string::npos) << e;
  }
  {
    gguf::Writer w;
    w.set_string("general.architecture", "qwen2");
    w.set_uint32("qwen2.embedding_length", 32);
    w.set_string("qwen2.block_count", "four");
    w.write(dir.path() / "m.gguf");
    const std::string e = error_of([&] { arch::load_model(dir.path() / "m.gguf"); });
    EXPECT_NE(e.find("key 'qwen2.block_count': is a string, expected an integer"), std::string::npos) << e;
  }
}

TEST(GgufModel, ShardsThatAreNotTheirPartAreRefused) {
  test::TempDir dir;
  const auto one = tiny_llama(dir.path());
  // Two copies of a whole model named as the two parts of a split one: neither says split.no.
  std::filesystem::copy_file(one, dir.path() / "m-00001-of-00002.gguf");
  std::filesystem::copy_file(one, dir.path() / "m-00002-of-00002.gguf");
  const std::string e = error_of([&] { arch::load_model(dir.path() / "m-00001-of-00002.gguf"); });
  EXPECT_NE(e.find("key 'split.no': this file is not shard 1 of 2"), std::string::npos) << e;
}

TEST(GgufModel, RopeFreqsAreLlama31sScalingAsATensor) {
  // llama.cpp's converter stores Llama 3.1's scaling as one divisor per rotated pair: the rope
  // built from them must turn as the config's llama3 block does.
  RopeSpec hf;
  hf.theta = 500000.0;
  hf.scaling.kind = RopeScaling::Kind::Llama3;
  hf.scaling.factor = 8.0;
  hf.scaling.original_max_position = 64;
  const int64_t head_dim = 16;
  RopeSpec plain;
  plain.theta = hf.theta;
  const ops::Rope base(plain, head_dim), scaled(hf, head_dim);
  std::vector<float> factors;
  for (size_t i = 0; i < base.inv_freq().size(); ++i)
    factors.push_back(static_cast<float>(base.inv_freq()[i] / scaled.inv_freq()[i]));
  EXPECT_GT(factors.back(), 1.0f);  // the low frequencies are slowed

  test::TempDir dir;
  const ModelWeights w = arch::load_model(tiny_llama(dir.path(), 0, false, factors));
  ASSERT_EQ(w.spec.layers.front().rope.scaling.kind, RopeScaling::Kind::Factors);
  RopeSpec gguf = w.spec.layers.front().rope;
  gguf.theta = hf.theta;
  const ops::Rope from_file(gguf, head_dim);
  for (size_t i = 0; i < factors.size(); ++i)
    EXPECT_NEAR(from_file.inv_freq()[i], scaled.inv_freq()[i], 1e-7 * scaled.inv_freq()[i]) << i;

  const std::string e = error_of([&] { arch::load_model(tiny_llama(dir.path(), 0, false, {1.0f, 2.0f})); });
  EXPECT_NE(e.find("tensor 'rope_freqs.weight': expected F32 [8]"), std::string::npos) << e;
}

TEST(GgufModel, KvDiskIdentityTellsGgufFilesApart) {
  // The disk tier keys blocks by the weights as stored: two quantizations of one model differ.
  const auto identity = [](const char* model) { return kv::kv_model_identity(find_model_files(shared(model))); };
  const uint64_t q8 = identity("models/gguf/tiny-toolcaller-Q8_0.gguf");
  EXPECT_EQ(q8, identity("models/gguf/tiny-toolcaller-Q8_0.gguf"));
  EXPECT_NE(q8, identity("models/gguf/tiny-toolcaller-Q4_K_M.gguf"));
  EXPECT_NE(q8, identity("models/tiny-toolcaller"));
}

TEST(GgufModel, PlanCountsTheFilesTensorsAndReadsItsTemplate) {
  const auto path = shared("models/gguf/tiny-toolcaller-Q4_K_M.gguf");
  plan::PlanRequest r;
  r.context = 4096;
  const plan::Plan p = plan::plan_model(arch::resolve_model(path), r);
  uint64_t tensor_bytes = 0;
  const gguf::File file(path);  // named: a temporary's tensors would be gone before the loop ran
  for (const auto& t : file.header().tensors) tensor_bytes += t.bytes;
  EXPECT_EQ(p.weight_bytes, tensor_bytes);
  EXPECT_EQ(p.architecture, "GGUF qwen2");
  ASSERT_TRUE(p.gates.template_source.has_value());
  EXPECT_TRUE(p.gates.tool_calls_usable());
  EXPECT_EQ(p.layout.groups.size(), 1u);

  const plan::Plan moe = plan::plan_model(arch::resolve_model(shared("models/gguf/tiny-gptoss-random-MXFP4.gguf")), r);
  ASSERT_TRUE(moe.active.active_bytes.has_value());
  EXPECT_LT(*moe.active.active_bytes, *moe.weight_bytes);  // 2 of 8 experts per token
  EXPECT_EQ(moe.active.moe_layers, 4);
  EXPECT_FALSE(moe.gates.template_source.has_value());
}

}  // namespace
}  // namespace keel
