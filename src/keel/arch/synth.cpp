#include "keel/arch/synth.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "keel/arch/family.h"
#include "keel/arch/model_loader.h"
#include "keel/model/config_view.h"
#include "keel/util/error.h"
#include "keel/util/half.h"

namespace keel {
namespace {

using arch::find_family;
using arch::runnable_spec;

struct PlannedTensor {
  std::string name;
  const char* dtype;
  std::vector<int64_t> shape;
  enum class Fill { Weight, Ones, SmallBias, MlxWords, MlxScales, MlxBiases, Mxfp4Blocks, Mxfp4Scales } fill;
  uint64_t bytes = 0;
};

// splitmix64: fast, good enough for random weights, identical everywhere for a given seed.
struct Random {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>(next() >> 40) / static_cast<float>(1ull << 24) * 2.0f - 1.0f; }
};

class Planner {
 public:
  Planner(const SynthOptions& o) : o_(o) {}

  void matrix(const std::string& prefix, int64_t rows, int64_t cols) {
    if (o_.format == WeightFormat::MLX4 || o_.format == WeightFormat::MLX8) {
      const int bits = o_.format == WeightFormat::MLX4 ? 4 : 8;
      if (cols % o_.mlx_group_size != 0)
        throw Error(prefix + ": input size " + std::to_string(cols) + " is not a multiple of the MLX group size");
      add(prefix + ".weight", "U32", {rows, cols * bits / 32}, PlannedTensor::Fill::MlxWords);
      add(prefix + ".scales", "BF16", {rows, cols / o_.mlx_group_size}, PlannedTensor::Fill::MlxScales);
      add(prefix + ".biases", "BF16", {rows, cols / o_.mlx_group_size}, PlannedTensor::Fill::MlxBiases);
    } else {
      add(prefix + ".weight", dense_dtype(), {rows, cols}, PlannedTensor::Fill::Weight);
    }
  }
  void vector(const std::string& name, int64_t n, PlannedTensor::Fill fill) { add(name, dense_dtype(), {n}, fill); }
  // gpt-oss experts as OpenAI ships them: (stack, rows, cols) MXFP4 blocks and scales, and a
  // (stack, rows) bias.
  void mxfp4_experts(const std::string& prefix, int64_t stack, int64_t rows, int64_t cols) {
    if (cols % 32 != 0) throw Error(prefix + ": input size " + std::to_string(cols) + " is not a multiple of 32");
    add(prefix + "_blocks", "U8", {stack, rows, cols / 32, 16}, PlannedTensor::Fill::Mxfp4Blocks);
    add(prefix + "_scales", "U8", {stack, rows, cols / 32}, PlannedTensor::Fill::Mxfp4Scales);
    add(prefix + "_bias", dense_dtype(), {stack, rows}, PlannedTensor::Fill::SmallBias);
  }

  // Stacked dense weights named without ".weight" (Gemma 4's experts).
  void stacked(const std::string& name, std::vector<int64_t> shape) {
    add(name, dense_dtype(), std::move(shape), PlannedTensor::Fill::Weight);
  }

  std::vector<PlannedTensor> tensors;

 private:
  const char* dense_dtype() const {
    return o_.format == WeightFormat::F32 ? "F32" : o_.format == WeightFormat::F16 ? "F16" : "BF16";
  }
  void add(std::string name, const char* dtype, std::vector<int64_t> shape, PlannedTensor::Fill fill) {
    uint64_t n = 1;
    for (int64_t d : shape) n *= static_cast<uint64_t>(d);
    const std::string type = dtype;
    const uint64_t elem = type == "F32" || type == "U32" ? 4 : type == "U8" ? 1 : 2;
    tensors.push_back({std::move(name), dtype, std::move(shape), fill, n * elem});
  }
  const SynthOptions& o_;
};

void write_tensor(std::ofstream& out, const PlannedTensor& t, Random& rng, float weight_scale) {
  std::vector<uint8_t> buf;
  constexpr uint64_t kChunk = 1 << 22;
  for (uint64_t done = 0; done < t.bytes; done += kChunk) {
    const uint64_t n = std::min(kChunk, t.bytes - done);
    buf.resize(n);
    if (t.fill == PlannedTensor::Fill::Mxfp4Scales) {
      // 2^(e - 127) with e = 119: the largest code (6) becomes 6/256, about weight_scale.
      std::fill(buf.begin(), buf.end(), uint8_t{119});
    } else if (t.fill == PlannedTensor::Fill::MlxWords || t.fill == PlannedTensor::Fill::Mxfp4Blocks) {
      for (uint64_t i = 0; i + 8 <= n; i += 8) {
        uint64_t r = rng.next();
        std::memcpy(buf.data() + i, &r, 8);
      }
    } else if (std::string(t.dtype) == "F32") {
      for (uint64_t i = 0; i < n; i += 4) {
        float v = t.fill == PlannedTensor::Fill::Ones ? 1.0f : rng.uniform() * weight_scale;
        std::memcpy(buf.data() + i, &v, 4);
      }
    } else {
      const bool f16 = std::string(t.dtype) == "F16";
      const int bits = 4;  // scale chosen so a 4-bit code spans about +-weight_scale
      for (uint64_t i = 0; i < n; i += 2) {
        float v;
        switch (t.fill) {
          case PlannedTensor::Fill::Ones: v = 1.0f; break;
          case PlannedTensor::Fill::MlxScales: v = weight_scale / static_cast<float>(1 << (bits - 1)); break;
          case PlannedTensor::Fill::MlxBiases: v = -weight_scale; break;
          case PlannedTensor::Fill::SmallBias: v = rng.uniform() * 0.1f; break;
          default: v = rng.uniform() * weight_scale; break;
        }
        uint16_t h = f16 ? float_to_f16(v) : float_to_bf16(v);
        std::memcpy(buf.data() + i, &h, 2);
      }
    }
    out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(n));
  }
}

// Keeps the first `layers` decoder layers: num_hidden_layers and the per-layer lists shrink with it.
void truncate_layers(nlohmann::ordered_json& config, int64_t layers) {
  nlohmann::ordered_json& c = config.contains("text_config") ? config["text_config"] : config;
  const int64_t total = c.value("num_hidden_layers", int64_t{0});
  if (layers > total)
    throw Error("--layers " + std::to_string(layers) + " is more than the config's " + std::to_string(total) + " layers");
  c["num_hidden_layers"] = layers;
  if (c.contains("layer_types") && c["layer_types"].is_array()) {
    auto& types = c["layer_types"];
    types.erase(types.begin() + layers, types.end());
  }
}

}  // namespace

uint64_t synthesize_model(const std::filesystem::path& config_json, const std::filesystem::path& out_dir,
                          const SynthOptions& o) {
  std::ifstream in(config_json);
  if (!in) throw Error(config_json.string() + ": not found");
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(in, nullptr, false);
  if (config.is_discarded()) throw Error(config_json.string() + ": not valid JSON");
  config.erase("quantization");
  config.erase("quantization_config");
  if (o.layers > 0) truncate_layers(config, o.layers);
  const bool mlx = o.format == WeightFormat::MLX4 || o.format == WeightFormat::MLX8;
  if (mlx) {
    const int bits = o.format == WeightFormat::MLX4 ? 4 : 8;
    config["quantization"] = {{"group_size", o.mlx_group_size}, {"bits", bits}};
  }
  config["torch_dtype"] = o.format == WeightFormat::F32 ? "float32" : o.format == WeightFormat::F16 ? "float16" : "bfloat16";
  const ModelSpec s = runnable_spec(ConfigView(nlohmann::json::parse(config.dump()), config_json.string()));
  // Multimodal configs get the language model where transformers writes it today.
  const TensorNames family_names = find_family(s.model_type)->tensor_names();
  const TensorNames names = config.contains("text_config") ? family_names.rooted_at(kMultimodalRoots[0]) : family_names;
  const bool mxfp4_experts = !names.expert_gate_up.empty();
  if (mxfp4_experts) {
    // gpt-oss ships its experts in MXFP4 and everything else unquantized; keel reads that form.
    if (mlx) throw Error(s.model_type + ": keel synth writes MXFP4 experts with bf16, f16 or f32 elsewhere (no MLX form)");
    config["quantization_config"] = {{"quant_method", "mxfp4"},
                                     {"modules_to_not_convert", {"model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                                 "model.embed_tokens", "lm_head"}}};
  }

  // The tensors load_weights() will look for, under the family's names.
  Planner p(o);
  using Fill = PlannedTensor::Fill;
  p.matrix(names.embed, s.vocab_size, s.hidden_size);
  for (int64_t i = 0; i < s.num_layers; ++i) {
    const LayerSpec& ls = s.layers[static_cast<size_t>(i)];
    const std::string l = names.layer_prefix + std::to_string(i) + ".";
    p.vector(l + names.attn_norm + ".weight", s.hidden_size, Fill::Ones);
    p.vector(l + names.ffn_norm + ".weight", s.hidden_size, Fill::Ones);
    if (ls.sandwich_norms) {
      p.vector(l + names.post_attn_norm + ".weight", s.hidden_size, Fill::Ones);
      p.vector(l + names.post_ffn_norm + ".weight", s.hidden_size, Fill::Ones);
    }
    p.matrix(l + names.q, ls.q_dim(), s.hidden_size);
    p.matrix(l + names.k, ls.kv_dim(), s.hidden_size);
    if (!ls.values_are_keys) p.matrix(l + names.v, ls.kv_dim(), s.hidden_size);
    p.matrix(l + names.o, s.hidden_size, ls.q_dim());
    if (ls.qkv_bias) {
      p.vector(l + names.q + ".bias", ls.q_dim(), Fill::SmallBias);
      p.vector(l + names.k + ".bias", ls.kv_dim(), Fill::SmallBias);
      p.vector(l + names.v + ".bias", ls.kv_dim(), Fill::SmallBias);
    }
    if (ls.o_bias) p.vector(l + names.o + ".bias", s.hidden_size, Fill::SmallBias);
    if (ls.qk_norm) {
      p.vector(l + names.q_norm + ".weight", ls.head_dim, Fill::Ones);
      p.vector(l + names.k_norm + ".weight", ls.head_dim, Fill::Ones);
    }
    if (ls.attention_sinks) p.vector(l + names.attention_sinks, ls.num_heads, Fill::SmallBias);
    if (ls.layer_scalar) p.vector(l + names.layer_scalar, 1, Fill::Ones);
    if (ls.moe && ls.moe->beside_dense) {
      // Gemma 4: the dense FFN, and beside it the router and the stacked experts.
      const int64_t ff = ls.moe->expert_ffn_dim, experts = ls.moe->experts;
      if (mlx) throw Error(s.model_type + ": keel synth writes this layout in bf16, f16 or f32 only");
      p.matrix(l + names.gate, ls.ffn_dim, s.hidden_size);
      p.matrix(l + names.up, ls.ffn_dim, s.hidden_size);
      p.matrix(l + names.down, s.hidden_size, ls.ffn_dim);
      p.matrix(l + names.router_proj, experts, s.hidden_size);
      p.vector(l + names.router_scale, s.hidden_size, Fill::Ones);
      p.vector(l + names.router_expert_scale, experts, Fill::Ones);
      for (const std::string* norm : {&names.post_dense_norm, &names.pre_moe_norm, &names.post_moe_norm})
        p.vector(l + *norm + ".weight", s.hidden_size, Fill::Ones);
      p.stacked(l + names.experts_gate_up_halves, {experts, 2 * ff, s.hidden_size});
      p.stacked(l + names.experts_down, {experts, s.hidden_size, ff});
    } else if (ls.moe && mxfp4_experts) {
      const int64_t ff = ls.moe->expert_ffn_dim, experts = ls.moe->experts;
      p.matrix(l + names.router, experts, s.hidden_size);
      p.vector(l + names.router + ".bias", experts, Fill::SmallBias);
      p.mxfp4_experts(l + names.stacked_experts + names.expert_gate_up, experts, 2 * ff, s.hidden_size);
      p.mxfp4_experts(l + names.stacked_experts + names.expert_down, experts, s.hidden_size, ff);
    } else if (ls.moe) {
      const int64_t ff = ls.moe->expert_ffn_dim;
      p.matrix(l + names.router, ls.moe->experts, s.hidden_size);
      for (int64_t e = 0; e < ls.moe->experts; ++e) {
        const std::string x = l + names.experts + std::to_string(e) + ".";
        p.matrix(x + names.expert_gate, ff, s.hidden_size);
        p.matrix(x + names.expert_up, ff, s.hidden_size);
        p.matrix(x + names.expert_down, s.hidden_size, ff);
      }
    } else {
      p.matrix(l + names.gate, ls.ffn_dim, s.hidden_size);
      p.matrix(l + names.up, ls.ffn_dim, s.hidden_size);
      p.matrix(l + names.down, s.hidden_size, ls.ffn_dim);
    }
  }
  p.vector(names.final_norm + ".weight", s.hidden_size, Fill::Ones);
  if (!s.tie_word_embeddings) p.matrix(names.lm_head, s.vocab_size, s.hidden_size);

  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", mlx ? "mlx" : "pt"}, {"generator", "keel synth"}};
  uint64_t offset = 0;
  for (const auto& t : p.tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned

  std::filesystem::create_directories(out_dir);
  {
    std::ofstream cfg(out_dir / "config.json");
    cfg << config.dump(2) << "\n";
    if (!cfg) throw Error((out_dir / "config.json").string() + ": cannot write");
  }
  std::ofstream out(out_dir / "model.safetensors", std::ios::binary);
  if (!out) throw Error((out_dir / "model.safetensors").string() + ": cannot write");
  uint64_t len = header_text.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((len >> (8 * i)) & 0xff));
  out << header_text;
  Random rng{o.seed};
  // Like the usual initializer_range: small enough that random activations stay finite.
  const float weight_scale = 0.02f;
  for (const auto& t : p.tensors) write_tensor(out, t, rng, weight_scale);
  out.close();
  if (!out) throw Error((out_dir / "model.safetensors").string() + ": write failed (disk full?)");
  return offset;
}

}  // namespace keel
