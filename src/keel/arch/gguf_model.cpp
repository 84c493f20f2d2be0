#include "keel/arch/gguf_model.h"

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "keel/arch/family.h"
#include "keel/arch/gguf_keys.h"
#include "keel/util/error.h"

namespace keel::arch {
namespace {

using nlohmann::json;
namespace gk = gguf_keys;

const Family& family_of(const gguf::File& f) {
  const std::string arch = f.require_string(gk::kArchitecture, "names the model's architecture");
  if (const Family* family = find_gguf_family(arch)) return *family;
  f.fail(gk::kArchitecture, "'" + arch + "' is not supported (supported: " + gguf_architecture_list() + ")");
}

// The layers whose FFN is dense though the model has experts (Qwen's mlp_only_layers): GGUF
// says so only by which tensors a layer has.
json dense_layers(const gguf::File& f, int64_t layers) {
  json out = json::array();
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    if (!f.header().find_tensor(p + "ffn_gate_exps.weight") && f.header().find_tensor(p + "ffn_gate.weight"))
      out.push_back(i);
  }
  return out;
}

// {arch}.rope.scaling.* as a config.json rope_scaling block; null for none.
json rope_scaling(const gguf::File& f, std::string_view arch) {
  auto K = [&](std::string_view suffix) { return gk::key(arch, suffix); };
  std::string type = f.optional_string(K(gk::kRopeScalingType)).value_or("none");
  std::optional<double> factor = f.optional_number(K(gk::kRopeScalingFactor));
  if (type == "none" && f.optional_number(K(gk::kRopeScaleLinear))) {  // the older key
    type = "linear";
    factor = f.optional_number(K(gk::kRopeScaleLinear));
  }
  if (type == "none") return nullptr;
  json r = {{"rope_type", type}, {"factor", factor.value_or(1.0)}};
  if (type == "yarn") {
    if (auto n = f.optional_int(K(gk::kRopeScalingOriginalContext))) r["original_max_position_embeddings"] = *n;
    if (auto b = f.optional_number(K(gk::kRopeScalingYarnBetaFast))) r["beta_fast"] = *b;
    if (auto b = f.optional_number(K(gk::kRopeScalingYarnBetaSlow))) r["beta_slow"] = *b;
    r["truncate"] = true;  // GGUF has no such key; llama.cpp always rounds the correction range
  } else if (type != "linear") {
    f.fail(K(gk::kRopeScalingType), "'" + type + "' is not supported (none, linear, yarn)");
  }
  return r;
}

}  // namespace

ConfigView gguf_config(const gguf::File& f) {
  const Family& family = family_of(f);
  auto K = [&](std::string_view suffix) { return gk::key(family.gguf_architecture, suffix); };
  const gguf::Header& h = f.header();
  json c;
  c["model_type"] = family.model_type;
  c["hidden_size"] = f.require_int(K(gk::kEmbeddingLength), "needed for the hidden size");
  const int64_t layers = f.require_int(K(gk::kBlockCount), "needed for the layer count");
  c["num_hidden_layers"] = layers;
  const int64_t heads = f.require_int(K(gk::kHeadCount), "needed for the attention shape");
  c["num_attention_heads"] = heads;
  c["num_key_value_heads"] = f.optional_int(K(gk::kHeadCountKv)).value_or(heads);
  if (auto key = f.optional_int(K(gk::kKeyLength))) {
    if (auto value = f.optional_int(K(gk::kValueLength)); value && *value != *key)
      f.fail(K(gk::kValueLength), "differs from attention.key_length; keel runs equal key and value sizes");
    c["head_dim"] = *key;
  }
  if (auto n = f.optional_int(K(gk::kContextLength))) c["max_position_embeddings"] = *n;
  if (auto eps = f.optional_number(K(gk::kRmsEpsilon))) c["rms_norm_eps"] = *eps;
  if (auto theta = f.optional_number(K(gk::kRopeFreqBase))) c["rope_theta"] = *theta;
  c["rope_scaling"] = rope_scaling(f, family.gguf_architecture);

  const gguf::Tensor* embed = h.find_tensor("token_embd.weight");
  if (!embed || embed->dims.size() != 2) throw Error(f.path().string() + ": tensor 'token_embd.weight' is missing or not 2-D");
  c["vocab_size"] = embed->dims[1];
  c["tie_word_embeddings"] = h.find_tensor("output.weight") == nullptr;
  c["attention_bias"] = h.find_tensor("blk.0.attn_q.bias") != nullptr;

  const std::optional<int64_t> experts = f.optional_int(K(gk::kExpertCount));
  const std::optional<int64_t> ffn = f.optional_int(K(gk::kFeedForwardLength));
  if (experts && *experts > 0) {
    const int64_t used = f.require_int(K(gk::kExpertUsedCount), "needed to route tokens to experts");
    const int64_t expert_ffn = f.optional_int(K(gk::kExpertFeedForwardLength)).value_or(ffn.value_or(0));
    if (family.model_type == "gpt_oss") {
      c["num_local_experts"] = *experts;
      c["intermediate_size"] = expert_ffn;
    } else {
      c["num_experts"] = *experts;
      c["moe_intermediate_size"] = expert_ffn;
      if (ffn) c["intermediate_size"] = *ffn;
      c["norm_topk_prob"] = f.optional_bool(K(gk::kExpertWeightsNorm)).value_or(true);
      c["mlp_only_layers"] = dense_layers(f, layers);
    }
    c["num_experts_per_tok"] = used;
  } else if (ffn) {
    c["intermediate_size"] = *ffn;
  }

  if (auto window = f.optional_int(K(gk::kSlidingWindow))) {
    c["sliding_window"] = *window;
    // llama.cpp's swa pattern n: layer i slides unless i % n == n - 1 (the last of each n is full).
    if (auto pattern = f.optional_int(K(gk::kSlidingWindowPattern))) {
      if (*pattern < 1) f.fail(K(gk::kSlidingWindowPattern), "must be at least 1");
      json types = json::array();
      for (int64_t i = 0; i < layers; ++i) types.push_back(i % *pattern < *pattern - 1 ? "sliding_attention" : "full_attention");
      c["layer_types"] = types;
    } else {
      c["use_sliding_window"] = true;
    }
  }

  json eos = json::array();
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (auto id = f.optional_int(key); id && std::find(eos.begin(), eos.end(), json(*id)) == eos.end()) eos.push_back(*id);
  if (!eos.empty()) c["eos_token_id"] = eos;
  if (auto bos = f.optional_int("tokenizer.ggml.bos_token_id")) c["bos_token_id"] = *bos;
  return ConfigView(std::move(c), f.path().string() + " (GGUF metadata)");
}

namespace {

// rope_freqs.weight: F32 (head_dim / 2), the divisor of each rotated pair's frequency.
std::vector<double> rope_factors(const gguf::File& f, const gguf::Tensor& t, int64_t head_dim) {
  const std::string where = f.path().string() + ": tensor '" + t.name + "': ";
  if (t.type->name != "F32" || t.dims.size() != 1 || t.dims[0] * 2 != head_dim)
    throw Error(where + "expected F32 [" + std::to_string(head_dim / 2) + "] (one factor per rotated pair), got " +
                std::string(t.type->name) + " with " + std::to_string(t.elements()) + " elements");
  const auto bytes = f.data(t);
  std::vector<double> out(static_cast<size_t>(t.dims[0]));
  for (size_t i = 0; i < out.size(); ++i) {
    float v;
    std::memcpy(&v, bytes.data() + 4 * i, 4);
    if (!(v > 0)) throw Error(where + "factor " + std::to_string(i) + " is not positive");
    out[i] = v;
  }
  return out;
}

}  // namespace

void adjust_for_gguf(const gguf::File& f, ModelSpec& spec) {
  const bool llama = family_of(f).gguf_architecture == "llama";
  const gguf::Tensor* freqs = f.header().find_tensor("rope_freqs.weight");
  for (LayerSpec& l : spec.layers) {
    l.rope.interleaved = llama;
    if (!freqs) continue;
    if (l.rope.scaling.kind != RopeScaling::Kind::None)
      throw Error(f.path().string() + ": tensor 'rope_freqs.weight' and key '" +
                  gk::key(family_of(f).gguf_architecture, gk::kRopeScalingType) + "' both scale the rope");
    l.rope.scaling.kind = RopeScaling::Kind::Factors;
    l.rope.scaling.factors = rope_factors(f, *freqs, l.head_dim);
  }
}

}  // namespace keel::arch
