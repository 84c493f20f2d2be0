#include "keel/arch/synth.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "keel/arch/checkpoint_tensors.h"
#include "keel/arch/family.h"
#include "keel/arch/gguf_keys.h"
#include "keel/arch/model_loader.h"
#include "keel/model/config_view.h"
#include "keel/model/gguf_writer.h"
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
  // Small: uniform in +-0.1 (biases, sinks, Qwen3-Next's dt_bias and conv taps); LogDecayRate:
  // log(A) for A uniform in [1, 16) (Qwen3-Next's A_log: the decay rate exp(A_log) as it is
  // initialized, A ~ U(0, 16), kept away from 0).
  enum class Fill { Weight, Ones, Small, LogDecayRate, MlxWords, MlxScales, MlxBiases, Mxfp4Blocks, Mxfp4Scales } fill;
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

  // A (rows, cols) matrix, or a (stack, rows, cols) stack of them (GGUF's expert stacks, never MLX).
  void matrix(const std::string& prefix, const std::vector<int64_t>& shape) {
    if (shape.size() == 3) return add(prefix + ".weight", dense_dtype(), shape, PlannedTensor::Fill::Weight);
    const int64_t rows = shape[0], cols = shape[1];
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
  // Norms, biases and other per-channel tensors, never quantized.
  void vector(const std::string& name, std::vector<int64_t> shape, PlannedTensor::Fill fill) {
    add(name, dense_dtype(), std::move(shape), fill);
  }
  // gpt-oss experts as OpenAI ships them: a (stack, rows, cols) matrix as MXFP4 blocks and scales
  // (its bias is a vector of its own).
  void mxfp4(const std::string& prefix, const std::vector<int64_t>& shape) {
    const int64_t stack = shape[0], rows = shape[1], cols = shape[2];
    if (cols % 32 != 0) throw Error(prefix + ": input size " + std::to_string(cols) + " is not a multiple of 32");
    add(prefix + "_blocks", "U8", {stack, rows, cols / 32, 16}, PlannedTensor::Fill::Mxfp4Blocks);
    add(prefix + "_scales", "U8", {stack, rows, cols / 32}, PlannedTensor::Fill::Mxfp4Scales);
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

// log(A) for A uniform in [1, 16).
float log_decay_rate(Random& rng) { return std::log(1.0f + 7.5f * (rng.uniform() + 1.0f)); }

void write_tensor(std::ostream& out, const PlannedTensor& t, Random& rng, float weight_scale) {
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
        // Small values in F32 files have always been drawn at weight_scale: kept, so a seed keeps its weights.
        float v = t.fill == PlannedTensor::Fill::Ones           ? 1.0f
                  : t.fill == PlannedTensor::Fill::LogDecayRate ? log_decay_rate(rng)
                                                                : rng.uniform() * weight_scale;
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
          case PlannedTensor::Fill::Small: v = rng.uniform() * 0.1f; break;
          case PlannedTensor::Fill::LogDecayRate: v = log_decay_rate(rng); break;
          default: v = rng.uniform() * weight_scale; break;
        }
        uint16_t h = f16 ? float_to_f16(v) : float_to_bf16(v);
        std::memcpy(buf.data() + i, &h, 2);
      }
    }
    out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(n));
  }
}

// Keeps the first `layers` decoder layers: num_hidden_layers and the per-layer lists shrink with it
// (layer_types; mlp_only_layers loses the layers that are gone). A rule over layer indices
// (full_attention_interval, decoder_sparse_step) gives the kept layers the kinds they had.
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
  if (c.contains("mlp_only_layers") && c["mlp_only_layers"].is_array()) {
    auto& dense = c["mlp_only_layers"];
    dense.erase(std::remove_if(dense.begin(), dense.end(),
                               [&](const nlohmann::ordered_json& i) { return i.is_number_integer() && i.get<int64_t>() >= layers; }),
                dense.end());
  }
}

// The config as it will be written, its spec and the names of its tensors.
struct SynthModel {
  nlohmann::ordered_json config;
  ModelSpec spec;
  TensorNames names;
  bool mlx = false;
};

SynthModel prepare(const std::filesystem::path& config_json, const SynthOptions& o) {
  std::ifstream in(config_json);
  if (!in) throw Error(config_json.string() + ": not found");
  SynthModel m;
  nlohmann::ordered_json& config = m.config;
  config = nlohmann::ordered_json::parse(in, nullptr, false);
  if (config.is_discarded()) throw Error(config_json.string() + ": not valid JSON");
  config.erase("quantization");
  config.erase("quantization_config");
  if (o.layers > 0) truncate_layers(config, o.layers);
  m.mlx = o.format == WeightFormat::MLX4 || o.format == WeightFormat::MLX8;
  if (m.mlx) {
    const int bits = o.format == WeightFormat::MLX4 ? 4 : 8;
    config["quantization"] = {{"group_size", o.mlx_group_size}, {"bits", bits}};
  }
  config["torch_dtype"] = o.format == WeightFormat::F32 ? "float32" : o.format == WeightFormat::F16 ? "float16" : "bfloat16";
  m.spec = runnable_spec(ConfigView(nlohmann::json::parse(config.dump()), config_json.string()));
  const ModelSpec& s = m.spec;
  // Multimodal configs get the language model where transformers writes it today.
  const TensorNames family_names = find_family(s.model_type)->tensor_names();
  m.names = config.contains("text_config") ? family_names.rooted_at(kMultimodalRoots[0]) : family_names;
  if (!m.names.expert_gate_up.empty()) {
    // gpt-oss ships its experts in MXFP4 and everything else unquantized; keel reads that form.
    if (m.mlx) throw Error(s.model_type + ": keel synth writes MXFP4 experts with bf16, f16 or f32 elsewhere (no MLX form)");
    config["quantization_config"] = {{"quant_method", "mxfp4"},
                                     {"modules_to_not_convert", {"model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                                 "model.embed_tokens", "lm_head"}}};
  }
  return m;
}

// arch::checkpoint_tensors() in the order keel synth draws their values, an order older than the
// list and kept so a seed keeps its weights: the final norm and lm_head after the layers, a dense
// FFN beside experts before them (Gemma 4), each MXFP4 stack's bias right after it (gpt-oss).
std::vector<arch::CheckpointTensor> in_draw_order(std::vector<arch::CheckpointTensor> list, const ModelSpec& s,
                                                  const TensorNames& n) {
  // The list opens with the embedding, lm_head unless tied, and the final norm.
  const size_t head = s.tie_word_embeddings ? 2 : 3;
  if (list.size() < head || list[0].name != n.embed || list[head - 1].name != n.final_norm + ".weight" ||
      (!s.tie_word_embeddings && list[1].name != n.lm_head))
    throw InternalError("keel synth: the checkpoint's tensor list no longer opens with the embedding, head and final norm");
  const auto first_layer = list.begin() + static_cast<std::ptrdiff_t>(head);
  std::reverse(list.begin() + 1, first_layer);
  std::rotate(list.begin() + 1, first_layer, list.end());
  auto at = [&](const std::string& name) {
    const auto it = std::find_if(list.begin(), list.end(), [&](const arch::CheckpointTensor& t) { return t.name == name; });
    if (it == list.end()) throw InternalError("keel synth: " + name + " is not in the checkpoint's tensor list");
    return it;
  };
  for (int64_t i = 0; i < s.num_layers; ++i) {
    const LayerSpec& ls = s.layers[static_cast<size_t>(i)];
    if (!ls.moe) continue;
    const std::string p = n.layer_prefix + std::to_string(i) + ".";
    if (ls.moe->beside_dense) {
      const auto gate = at(p + n.gate);  // gate, up, down
      std::rotate(at(p + n.router_proj), gate, gate + 3);
    }
    if (!n.expert_gate_up.empty()) {
      for (const std::string& stack : {n.expert_gate_up, n.expert_down}) {
        const std::string matrix = p + n.stacked_experts + stack;
        const auto bias = at(matrix + "_bias");
        std::rotate(at(matrix) + 1, bias, bias + 1);
      }
    }
  }
  return list;
}

// What a vector of the list holds: small random values for biases (sinks, Qwen3-Next's dt_bias
// and conv taps too), the log of a decay rate for A_log, ones for norms and scales.
PlannedTensor::Fill vector_fill(const std::string& name, const TensorNames& n) {
  using Fill = PlannedTensor::Fill;
  if (name.ends_with(n.linear_attn + "A_log")) return Fill::LogDecayRate;
  if (name.ends_with(".bias") || name.ends_with("_bias") || name.ends_with(n.linear_attn + "conv1d.weight") ||
      (!n.attention_sinks.empty() && name.ends_with(n.attention_sinks)))
    return Fill::Small;
  return Fill::Ones;
}

// The tensors load_weights() will look for, under `names`, in the order their random values are
// drawn, stored as the options say. `stacked_experts`: routed experts as (experts, rows, cols)
// stacks (GGUF) instead of one matrix per expert.
void plan_tensors(Planner& p, const ModelSpec& s, const TensorNames& names, bool mlx, bool stacked_experts = false) {
  const std::vector<arch::CheckpointTensor> list =
      in_draw_order(arch::checkpoint_tensors(s, names, stacked_experts), s, names);
  for (const arch::CheckpointTensor& t : list)
    if (mlx && t.matrix && !t.weight_suffix)  // Gemma 4's stacked experts have no MLX form in keel
      throw Error(s.model_type + ": keel synth writes this layout in bf16, f16 or f32 only");
  for (const arch::CheckpointTensor& t : list) {
    if (!t.matrix) {
      p.vector(t.name, t.shape, vector_fill(t.name, names));
    } else if (t.loads_as & arch::kStoredMxfp4) {
      p.mxfp4(t.name, t.shape);
    } else if (!t.weight_suffix) {
      p.stacked(t.name, t.shape);
    } else if (t.shape.size() == 2 || (t.shape.size() == 3 && stacked_experts)) {
      p.matrix(t.name, t.shape);
    } else {
      throw InternalError("keel synth: " + t.name + ": no stacked form to write");
    }
  }
}

// Like the usual initializer_range: small enough that random activations stay finite.
constexpr float kWeightScale = 0.02f;

}  // namespace

uint64_t synthesize_model(const std::filesystem::path& config_json, const std::filesystem::path& out_dir,
                          const SynthOptions& o) {
  const SynthModel m = prepare(config_json, o);
  const nlohmann::ordered_json& config = m.config;
  const bool mlx = m.mlx;
  Planner p(o);
  plan_tensors(p, m.spec, m.names, m.mlx);

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
  for (const auto& t : p.tensors) write_tensor(out, t, rng, kWeightScale);
  out.close();
  if (!out) throw Error((out_dir / "model.safetensors").string() + ": write failed (disk full?)");
  return offset;
}

namespace {

// What a family's GGUF layout needs that keel synth does not write: refused by name, since
// llama.cpp would read such a file differently from the folder of the same seed.
void check_gguf_writable(const SynthModel& m, const arch::Family& family) {
  const ModelSpec& s = m.spec;
  auto refuse = [&](const std::string& why) {
    throw Error("keel synth: " + s.model_type + ": " + why +
                "; GGUF output covers llama, qwen2, qwen3 and qwen3_moe models");
  };
  if (!family.gguf_tensor_names) refuse("no GGUF layout");
  if (m.config.contains("text_config")) refuse("a multimodal config");
  if (m.mlx) refuse("MLX weights have no GGUF form (write bf16 and use llama-quantize)");
  const LayerSpec& first = s.layers.front();
  for (const LayerSpec& l : s.layers) {
    if (l.attention != AttentionKind::Full || l.sandwich_norms || l.attention_sinks || l.layer_scalar ||
        l.values_are_keys || l.v_norm)
      refuse("layers beyond plain attention and a dense or routed-expert FFN");
    if (l.num_heads != first.num_heads || l.num_kv_heads != first.num_kv_heads || l.head_dim != first.head_dim ||
        l.ffn_dim != first.ffn_dim || !(l.rope == first.rope) || l.moe.has_value() != first.moe.has_value())
      refuse("layers of different shapes (dense FFNs beside expert layers included)");
    if (!l.moe) continue;
    const MoeSpec& e = *l.moe;
    // llama.cpp's qwen3moe: softmax over every expert, top-k, renormalized; plain SwiGLU experts.
    if (e.shared_expert_ffn_dim || e.softmax_after_topk || e.biases || e.swiglu_limit > 0 || e.beside_dense ||
        !e.norm_topk_prob)
      refuse("experts other than routed SwiGLU experts renormalized over the top k");
  }
  if (first.rope.scaling.kind != RopeScaling::Kind::None) refuse("rope scaling");
}

// A GGUF tensor's type and size for a planned tensor of the folder: 1-D tensors (norms, biases)
// as F32, matrices in their own dtype.
uint32_t gguf_type(const PlannedTensor& t) {
  const std::string dtype = t.dtype;
  if (t.shape.size() == 1 || dtype == "F32") return 0;  // GGML_TYPE_F32
  return dtype == "F16" ? 1 : 30;                        // GGML_TYPE_F16, BF16
}
uint64_t gguf_bytes(const PlannedTensor& t) {
  return t.shape.size() == 1 && std::string(t.dtype) != "F32" ? 2 * t.bytes : t.bytes;
}

// The GGUF bytes of one planned tensor of the folder: 1-D tensors (norms, biases) as F32, whose
// values are exactly the bf16/f16 ones of the folder; q/k of the llama architecture with each
// head's rows permuted from Hugging Face's rotate-half order to the interleaved order llama.cpp's
// rope pairs (row h*d + 2i + j of the file is row h*d + j*d/2 + i of the checkpoint).
std::string gguf_data(const PlannedTensor& t, std::string hf_bytes, int64_t permute_heads) {
  const std::string dtype = t.dtype;
  std::string data;
  if (t.shape.size() == 1 && dtype != "F32") {
    data.resize(hf_bytes.size() * 2);
    for (size_t i = 0; i < hf_bytes.size() / 2; ++i) {
      uint16_t h;
      std::memcpy(&h, hf_bytes.data() + 2 * i, 2);
      const float f = dtype == "F16" ? f16_to_float(h) : bf16_to_float(h);
      std::memcpy(data.data() + 4 * i, &f, 4);
    }
  } else {
    data = std::move(hf_bytes);
  }
  if (permute_heads > 0) {
    const int64_t rows = t.shape[0];
    const size_t row_bytes = data.size() / static_cast<size_t>(rows);
    const int64_t head_dim = rows / permute_heads, half = head_dim / 2;
    std::string out(data.size(), '\0');
    for (int64_t h = 0; h < permute_heads; ++h)
      for (int64_t i = 0; i < half; ++i)
        for (int64_t j = 0; j < 2; ++j)
          std::memcpy(out.data() + static_cast<size_t>(h * head_dim + 2 * i + j) * row_bytes,
                      data.data() + static_cast<size_t>(h * head_dim + j * half + i) * row_bytes, row_bytes);
    data = std::move(out);
  }
  return data;
}

// Which of the folder's tensors make each GGUF tensor, laid end to end: a stacked expert matrix
// (blk.N.ffn_gate_exps) is the folder's per-expert matrices (model.layers.N.mlp.experts.E.gate_proj)
// in expert order; every other GGUF tensor is the next folder tensor left, in the order both lists
// share.
std::vector<std::vector<size_t>> gguf_sources(const std::vector<PlannedTensor>& folder, const TensorNames& hn,
                                              const std::vector<PlannedTensor>& file, const TensorNames& gn) {
  std::map<std::string, size_t> by_name;
  for (size_t i = 0; i < folder.size(); ++i) by_name[folder[i].name] = i;
  std::vector<std::vector<size_t>> sources(file.size());
  std::vector<bool> claimed(folder.size(), false);
  for (size_t j = 0; j < file.size(); ++j) {
    if (file[j].shape.size() != 3) continue;
    const std::string& name = file[j].name;  // blk.N.{stacked_experts}{expert_gate}.weight
    const size_t dot = name.find('.', gn.layer_prefix.size());
    const std::string layer = name.substr(gn.layer_prefix.size(), dot - gn.layer_prefix.size());
    const std::string matrix = name.substr(dot + 1 + gn.stacked_experts.size());
    std::string hf_matrix;
    for (auto [g, h] : {std::pair{&gn.expert_gate, &hn.expert_gate}, {&gn.expert_up, &hn.expert_up},
                        {&gn.expert_down, &hn.expert_down}})
      if (matrix == *g + ".weight") hf_matrix = *h + ".weight";
    for (int64_t e = 0; e < file[j].shape[0]; ++e) {
      const auto it = by_name.find(hn.layer_prefix + layer + "." + hn.experts + std::to_string(e) + "." + hf_matrix);
      if (hf_matrix.empty() || it == by_name.end() || claimed[it->second])
        throw InternalError("keel synth: GGUF stack " + name + " has no matching folder experts");
      sources[j].push_back(it->second);
      claimed[it->second] = true;
    }
  }
  size_t next = 0;
  for (size_t j = 0; j < file.size(); ++j) {
    if (!sources[j].empty()) continue;
    while (next < folder.size() && claimed[next]) ++next;
    if (next >= folder.size() || folder[next].shape != file[j].shape)
      throw InternalError("keel synth: GGUF tensor " + file[j].name + " has no matching folder tensor");
    sources[j].push_back(next);
    claimed[next++] = true;
  }
  if (std::find(claimed.begin(), claimed.end(), false) != claimed.end())
    throw InternalError("keel synth: folder tensors left over after the GGUF plan");
  return sources;
}

// Draws the folder's tensors in order and hands each out once, keeping those drawn ahead of their
// turn (a layer's up and down experts while its gate stack is written): at most one layer's
// experts are held.
class FolderValues {
 public:
  FolderValues(const std::vector<PlannedTensor>& folder, uint64_t seed) : folder_(folder), rng_{seed} {}
  std::string take(size_t i) {
    while (drawn_ <= i) {
      std::ostringstream values;
      write_tensor(values, folder_[drawn_], rng_, kWeightScale);
      held_.emplace(drawn_++, std::move(values).str());
    }
    const auto it = held_.find(i);
    if (it == held_.end()) throw InternalError("keel synth: folder tensor " + folder_[i].name + " taken twice");
    std::string out = std::move(it->second);
    held_.erase(it);
    return out;
  }

 private:
  const std::vector<PlannedTensor>& folder_;
  Random rng_;
  size_t drawn_ = 0;
  std::map<size_t, std::string> held_;
};

}  // namespace

uint64_t synthesize_gguf(const std::filesystem::path& config_json, const std::filesystem::path& out_file,
                         const SynthOptions& o, const GgufMetadataHook& add_tokenizer) {
  const SynthModel m = prepare(config_json, o);
  const ModelSpec& s = m.spec;
  const arch::Family& family = *find_family(s.model_type);
  check_gguf_writable(m, family);
  const LayerSpec& layer = s.layers.front();

  // The same plan under both names: the values are drawn in the folder's order, so a folder and a
  // GGUF of one seed hold the same weights.
  Planner hf(o), gg(o);
  plan_tensors(hf, s, m.names, false);
  const TensorNames gguf_names = family.gguf_tensor_names();
  plan_tensors(gg, s, gguf_names, false, /*stacked_experts=*/true);
  const std::vector<std::vector<size_t>> sources = gguf_sources(hf.tensors, m.names, gg.tensors, gguf_names);

  namespace k = arch::gguf_keys;
  const std::string arch_name(family.gguf_architecture);
  gguf::Writer w;
  w.set_string(std::string(k::kArchitecture), arch_name);
  w.set_string(std::string(k::kName), out_file.stem().string());
  w.set_uint32(std::string(k::kFileType), o.format == WeightFormat::F32   ? k::kFileTypeF32
                                          : o.format == WeightFormat::F16 ? k::kFileTypeF16
                                                                          : k::kFileTypeBF16);
  w.set_uint32(k::key(arch_name, k::kContextLength), static_cast<uint32_t>(s.max_position));
  w.set_uint32(k::key(arch_name, k::kEmbeddingLength), static_cast<uint32_t>(s.hidden_size));
  w.set_uint32(k::key(arch_name, k::kBlockCount), static_cast<uint32_t>(s.num_layers));
  if (layer.ffn_dim > 0) w.set_uint32(k::key(arch_name, k::kFeedForwardLength), static_cast<uint32_t>(layer.ffn_dim));
  if (layer.moe) {
    w.set_uint32(k::key(arch_name, k::kExpertCount), static_cast<uint32_t>(layer.moe->experts));
    w.set_uint32(k::key(arch_name, k::kExpertUsedCount), static_cast<uint32_t>(layer.moe->experts_per_token));
    w.set_uint32(k::key(arch_name, k::kExpertFeedForwardLength), static_cast<uint32_t>(layer.moe->expert_ffn_dim));
  }
  w.set_uint32(k::key(arch_name, k::kHeadCount), static_cast<uint32_t>(layer.num_heads));
  w.set_uint32(k::key(arch_name, k::kHeadCountKv), static_cast<uint32_t>(layer.num_kv_heads));
  if (layer.head_dim * layer.num_heads != s.hidden_size) {  // llama.cpp's default is hidden / heads
    w.set_uint32(k::key(arch_name, k::kKeyLength), static_cast<uint32_t>(layer.head_dim));
    w.set_uint32(k::key(arch_name, k::kValueLength), static_cast<uint32_t>(layer.head_dim));
  }
  w.set_uint32(k::key(arch_name, k::kRopeDimensionCount), static_cast<uint32_t>(layer.head_dim));
  w.set_float32(k::key(arch_name, k::kRopeFreqBase), static_cast<float>(layer.rope.theta));
  w.set_float32(k::key(arch_name, k::kRmsEpsilon), static_cast<float>(s.norm_eps));
  w.set_uint32(k::key(arch_name, k::kVocabSize), static_cast<uint32_t>(s.vocab_size));
  if (add_tokenizer) add_tokenizer(w, s.vocab_size);

  // q and k (weights and biases) of a llama layer are permuted per head, k by its kv heads.
  const bool permute = family.gguf_architecture == "llama";
  const TensorNames& hn = m.names;
  auto heads_to_permute = [&](const PlannedTensor& t) -> int64_t {
    if (!permute || !t.name.starts_with(hn.layer_prefix)) return 0;
    const std::string rest = t.name.substr(t.name.find('.', hn.layer_prefix.size()) + 1);
    if (rest == hn.q + ".weight" || rest == hn.q + ".bias") return layer.num_heads;
    if (rest == hn.k + ".weight" || rest == hn.k + ".bias") return layer.num_kv_heads;
    return 0;
  };
  auto values = std::make_shared<FolderValues>(hf.tensors, o.seed);
  uint64_t bytes = 0;
  for (size_t j = 0; j < gg.tensors.size(); ++j) {
    const PlannedTensor& t = gg.tensors[j];
    uint64_t size = 0;
    for (size_t i : sources[j]) size += gguf_bytes(hf.tensors[i]);
    bytes += size;
    w.add_tensor(t.name, {t.shape.rbegin(), t.shape.rend()}, gguf_type(hf.tensors[sources[j].front()]), size,
                 [&, values, j, size] {
                   std::string data;
                   data.reserve(size);
                   for (size_t i : sources[j]) {
                     const PlannedTensor& from = hf.tensors[i];
                     data += gguf_data(from, values->take(i), heads_to_permute(from));
                   }
                   return data;
                 });
  }
  if (out_file.has_parent_path()) std::filesystem::create_directories(out_file.parent_path());
  w.write(out_file);
  return bytes;
}

}  // namespace keel
