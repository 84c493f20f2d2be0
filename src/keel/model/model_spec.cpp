#include "keel/model/model_spec.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "keel/model/config_view.h"
#include "keel/util/error.h"

namespace keel {
namespace {

using nlohmann::json;

json read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw Error(path.string() + ": not found or unreadable");
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw Error(path.string() + ": not valid JSON");
  return j;
}

void add_ids(const json& value, std::vector<int32_t>& out) {
  if (value.is_number_integer()) out.push_back(value.get<int32_t>());
  if (value.is_array())
    for (const auto& v : value)
      if (v.is_number_integer()) out.push_back(v.get<int32_t>());
}

int64_t positive_or(const ConfigView& c, std::string_view key, int64_t fallback) {
  auto v = c.optional_int(key);
  if (!v) return fallback;
  if (*v <= 0) c.fail(key, "must be positive, got " + std::to_string(*v));
  return *v;
}

// Decides the attention kind of each layer from whichever key the config family uses.
std::vector<AttentionKind> read_layer_kinds(const ConfigView& c, int64_t num_layers, std::string& source) {
  std::vector<AttentionKind> kinds(static_cast<size_t>(num_layers), AttentionKind::Full);
  const bool mla = c.has("kv_lora_rank");
  const AttentionKind full = mla ? AttentionKind::Mla : AttentionKind::Full;
  for (auto& k : kinds) k = full;

  if (const json* types = c.find("layer_types")) {
    if (!types->is_array()) c.fail("layer_types", "must be a list of layer kinds");
    if (static_cast<int64_t>(types->size()) != num_layers)
      c.fail("layer_types", "has " + std::to_string(types->size()) + " entries but num_hidden_layers is " +
                                std::to_string(num_layers));
    for (size_t i = 0; i < types->size(); ++i) {
      const json& t = (*types)[i];
      const std::string name = t.is_string() ? t.get<std::string>() : t.dump();
      if (name == "full_attention") {
        kinds[i] = full;
      } else if (name == "sliding_attention") {
        kinds[i] = AttentionKind::Sliding;
      } else if (name == "linear_attention") {
        kinds[i] = AttentionKind::Linear;
      } else {
        c.fail("layer_types", "entry " + std::to_string(i) + " is '" + name +
                                  "', a layer kind keel does not know (known: full_attention, "
                                  "sliding_attention, linear_attention)");
      }
    }
    source = "layer_types";
    return kinds;
  }

  if (auto interval = c.optional_int("full_attention_interval")) {
    if (*interval <= 0) c.fail("full_attention_interval", "must be positive");
    for (int64_t i = 0; i < num_layers; ++i)
      kinds[static_cast<size_t>(i)] = (i + 1) % *interval == 0 ? full : AttentionKind::Linear;
    source = "full_attention_interval = " + std::to_string(*interval);
    return kinds;
  }

  // Qwen2-family configs carry a sliding_window value that is switched off by use_sliding_window.
  const bool sliding_on = c.has("sliding_window") && c.optional_bool("use_sliding_window").value_or(true);
  if (!sliding_on) {
    source = "no sliding window or layer_types in config.json";
    return kinds;
  }
  const std::string model_type = c.optional_string("model_type").value_or("");
  if (auto pattern = c.optional_int("sliding_window_pattern")) {
    if (*pattern <= 0) c.fail("sliding_window_pattern", "must be positive");
    for (int64_t i = 0; i < num_layers; ++i)
      kinds[static_cast<size_t>(i)] = (i + 1) % *pattern == 0 ? full : AttentionKind::Sliding;
    source = "sliding_window_pattern = " + std::to_string(*pattern);
  } else if (model_type == "gemma2") {
    for (int64_t i = 0; i < num_layers; ++i)
      kinds[static_cast<size_t>(i)] = i % 2 == 0 ? AttentionKind::Sliding : full;
    source = "gemma2: even layers sliding";
  } else if (auto full_layers = c.optional_int("max_window_layers"); full_layers && model_type.rfind("qwen", 0) == 0) {
    for (int64_t i = *full_layers; i < num_layers; ++i) kinds[static_cast<size_t>(i)] = AttentionKind::Sliding;
    source = "use_sliding_window: layers from max_window_layers = " + std::to_string(*full_layers) + " on";
  } else {
    for (auto& k : kinds) k = AttentionKind::Sliding;
    source = "sliding_window on every layer";
  }
  return kinds;
}

// The scaling described by one rope block: `rope_scaling` of older configs, or an entry of
// `rope_parameters` in newer ones (which also holds rope_theta).
RopeScaling read_rope_scaling(const ConfigView& c, const json* j, std::string_view key) {
  RopeScaling rs;
  if (!j) return rs;
  if (!j->is_object()) c.fail(key, "must be an object or null");
  const std::string type = j->value("rope_type", j->value("type", ""));
  if (type == "default" || type.empty()) return rs;
  ConfigView block(*j, c.label() + " " + std::string(key));
  rs.factor = block.optional_number("factor").value_or(1.0);
  if (rs.factor <= 0) c.fail(key, "needs factor > 0");
  if (type == "linear") {
    rs.kind = RopeScaling::Kind::Linear;
  } else if (type == "llama3") {
    rs.kind = RopeScaling::Kind::Llama3;
    rs.low_freq_factor = block.optional_number("low_freq_factor").value_or(1.0);
    rs.high_freq_factor = block.optional_number("high_freq_factor").value_or(4.0);
    rs.original_max_position = positive_or(block, "original_max_position_embeddings", 8192);
    if (rs.high_freq_factor <= rs.low_freq_factor)
      c.fail(key, "needs high_freq_factor > low_freq_factor");
  } else if (type == "yarn" && !block.has("mscale") && !block.has("mscale_all_dim")) {
    // (DeepSeek's mscale pair changes the attention factor; keel runs no such model, so that
    // variant stays unsupported below and is refused by name.)
    rs.kind = RopeScaling::Kind::Yarn;
    rs.original_max_position = positive_or(block, "original_max_position_embeddings", c.optional_int("max_position_embeddings").value_or(4096));
    rs.beta_fast = block.optional_number("beta_fast").value_or(32.0);
    rs.beta_slow = block.optional_number("beta_slow").value_or(1.0);
    rs.truncate = block.optional_bool("truncate").value_or(true);
    rs.attention_factor = block.optional_number("attention_factor")
                              .value_or(rs.factor <= 1.0 ? 1.0 : 0.1 * std::log(rs.factor) + 1.0);
  } else if (type == "proportional") {
    rs.kind = RopeScaling::Kind::Proportional;
    rs.partial_rotary_factor = block.optional_number("partial_rotary_factor").value_or(1.0);
    if (rs.partial_rotary_factor <= 0 || rs.partial_rotary_factor > 1) c.fail(key, "needs 0 < partial_rotary_factor <= 1");
  } else {
    rs.kind = RopeScaling::Kind::Unsupported;
    rs.unsupported_type = type == "yarn" ? "yarn with mscale" : type;
  }
  return rs;
}

// The rope of a layer of `layer_type` ("full_attention", "sliding_attention"): newer configs give
// `rope_parameters`, either one block or one per layer type; older ones rope_theta + rope_scaling.
RopeSpec read_rope(const ConfigView& c, const std::string& layer_type) {
  if (const json* params = c.find("rope_parameters"); params && params->is_object()) {
    const json* block = params->contains(layer_type) ? &(*params)[layer_type] : params;
    if (!block->is_object()) c.fail("rope_parameters", "must be an object");
    const double theta = block->value("rope_theta", c.optional_number("rope_theta").value_or(10000.0));
    return RopeSpec{theta, read_rope_scaling(c, block, "rope_parameters")};
  }
  return RopeSpec{c.optional_number("rope_theta").value_or(10000.0), read_rope_scaling(c, c.find("rope_scaling"), "rope_scaling")};
}

const char* layer_type_name(AttentionKind kind) {
  switch (kind) {
    case AttentionKind::Sliding: return "sliding_attention";
    case AttentionKind::Linear: return "linear_attention";
    default: return "full_attention";
  }
}

// Attention shape of one layer. Gemma 4: the global (full-attention) layers have their own head
// size, and with attention_k_eq_v their own KV head count.
void read_attention_shape(const ConfigView& c, const ModelSpec& s, LayerSpec& l) {
  l.num_heads = s.num_heads;
  l.num_kv_heads = s.num_kv_heads;
  l.head_dim = s.head_dim;
  if (l.attention == AttentionKind::Full) {
    if (auto ghd = c.optional_int("global_head_dim")) l.head_dim = *ghd;
    if (c.optional_bool("attention_k_eq_v").value_or(false))
      if (auto gkv = c.optional_int("num_global_key_value_heads")) l.num_kv_heads = *gkv;
  }
  if (l.num_kv_heads <= 0) c.fail("num_key_value_heads", "must be positive");
  if (l.head_dim <= 0) c.fail("head_dim", "must be positive");
  if (l.num_heads % l.num_kv_heads != 0)
    c.fail("num_key_value_heads", "must divide num_attention_heads (" + std::to_string(l.num_heads) + ")");
  if (l.attention == AttentionKind::Sliding)
    l.window = c.require_int("sliding_window", "needed for the sliding-window layers");
  if (l.attention == AttentionKind::Mla) {
    constexpr std::string_view why = "needed for the MLA KV size";
    MlaDims m;
    m.kv_lora_rank = c.require_int("kv_lora_rank", why);
    m.qk_rope_head_dim = c.require_int("qk_rope_head_dim", why);
    m.qk_nope_head_dim = c.optional_int("qk_nope_head_dim").value_or(0);
    if (c.has("index_topk")) m.index_head_dim = c.require_int("index_head_dim", "needed for the sparse-attention indexer keys");
    l.mla = m;
  }
  if (l.attention == AttentionKind::Linear) {
    constexpr std::string_view why = "needed for the linear-attention state of a hybrid model";
    LinearAttentionDims d;
    d.value_heads = c.require_int("linear_num_value_heads", why);
    d.key_heads = c.require_int("linear_num_key_heads", why);
    d.key_head_dim = c.require_int("linear_key_head_dim", why);
    d.value_head_dim = c.require_int("linear_value_head_dim", why);
    d.conv_kernel = c.require_int("linear_conv_kernel_dim", why);
    l.linear = d;
  }
}

// Qwen-style MoE (num_experts, decoder_sparse_step, mlp_only_layers), gpt-oss style
// (num_local_experts on every layer) and DeepSeek style (n_routed_experts after
// first_k_dense_replace dense layers, n_shared_experts).
std::optional<MoeSpec> read_moe(const ConfigView& c, int64_t layer) {
  std::optional<int64_t> experts;
  for (const char* key : {"num_experts", "num_local_experts", "n_routed_experts"})
    if (!experts) experts = c.optional_int(key);
  if (!experts || *experts <= 0) return std::nullopt;
  if (layer < c.optional_int("first_k_dense_replace").value_or(0)) return std::nullopt;
  if (const json* dense = c.find("mlp_only_layers"); dense && dense->is_array())
    for (const json& d : *dense)
      if (d.is_number_integer() && d.get<int64_t>() == layer) return std::nullopt;
  const int64_t step = positive_or(c, "decoder_sparse_step", 1);
  if ((layer + 1) % step != 0) return std::nullopt;
  MoeSpec m;
  m.experts = *experts;
  for (const char* key : {"num_experts_per_tok", "experts_per_token", "top_k_experts"})
    if (!m.experts_per_token) m.experts_per_token = c.optional_int(key).value_or(0);
  if (m.experts_per_token <= 0) c.fail("num_experts_per_tok", "must be a positive number of experts per token");
  m.expert_ffn_dim = c.optional_int("moe_intermediate_size").value_or(c.optional_int("intermediate_size").value_or(0));
  m.shared_expert_ffn_dim = c.optional_int("shared_expert_intermediate_size").value_or(0);
  if (auto n_shared = c.optional_int("n_shared_experts")) m.shared_expert_ffn_dim = *n_shared * m.expert_ffn_dim;
  m.norm_topk_prob = c.optional_bool("norm_topk_prob").value_or(false);
  return m;
}

}  // namespace

const char* attention_kind_name(AttentionKind kind) {
  switch (kind) {
    case AttentionKind::Full: return "full attention";
    case AttentionKind::Sliding: return "sliding window";
    case AttentionKind::Mla: return "MLA";
    case AttentionKind::Linear: return "linear attention";
    case AttentionKind::SharedKv: return "shared KV";
  }
  return "?";
}

ModelSpec read_model_spec(const ConfigView& c) {
  constexpr std::string_view why = "needed to describe the model";
  ModelSpec s;
  auto mt = c.optional_string("model_type");
  if (!mt) throw Error(c.label() + ": missing key 'model_type'");
  s.model_type = *mt;
  s.hidden_size = c.require_int("hidden_size", why);
  s.num_layers = c.require_int("num_hidden_layers", why);
  s.vocab_size = c.require_int("vocab_size", why);
  s.num_heads = c.require_int("num_attention_heads", why);
  s.num_kv_heads = positive_or(c, "num_key_value_heads", s.num_heads);
  if (!c.has("head_dim") && s.hidden_size % s.num_heads != 0)
    c.fail("hidden_size", "is not a multiple of num_attention_heads and no head_dim is given");
  s.head_dim = positive_or(c, "head_dim", s.hidden_size / s.num_heads);
  s.intermediate_size = positive_or(c, "intermediate_size", 0);
  s.max_position = positive_or(c, "max_position_embeddings", 4096);
  s.norm_eps = c.optional_number("rms_norm_eps").value_or(1e-6);
  s.final_softcap = c.optional_number("final_logit_softcapping").value_or(0.0);
  s.tie_word_embeddings = c.optional_bool("tie_word_embeddings").value_or(false);

  const double softcap = c.optional_number("attn_logit_softcapping").value_or(0.0);
  const bool attention_bias = c.optional_bool("attention_bias").value_or(false);
  std::vector<AttentionKind> kinds = read_layer_kinds(c, s.num_layers, s.layer_pattern_source);
  // Gemma 3n/4: the last num_kv_shared_layers layers attend over an earlier layer's cache.
  if (auto shared = c.optional_int("num_kv_shared_layers"); shared && *shared > 0) {
    if (*shared > s.num_layers) c.fail("num_kv_shared_layers", "is larger than num_hidden_layers");
    for (int64_t i = s.num_layers - *shared; i < s.num_layers; ++i) kinds[static_cast<size_t>(i)] = AttentionKind::SharedKv;
  }

  for (int64_t i = 0; i < s.num_layers; ++i) {
    LayerSpec l;
    l.attention = kinds[static_cast<size_t>(i)];
    read_attention_shape(c, s, l);
    l.rope = read_rope(c, layer_type_name(l.attention));
    l.attention_scale = 1.0 / std::sqrt(static_cast<double>(l.head_dim));
    l.attention_softcap = softcap;
    l.qkv_bias = l.o_bias = attention_bias;
    l.ffn_dim = s.intermediate_size;
    l.moe = read_moe(c, i);
    s.layers.push_back(l);
  }

  if (const json* q = c.find("quantization")) {
    if (!q->is_object()) c.fail("quantization", "must be an object");
    ConfigView qc(*q, c.label() + " quantization");
    auto read_block = [&](const ConfigView& block) {
      MlxQuantization mq;
      mq.bits = static_cast<int>(block.require_int("bits", "needed to read MLX weights"));
      mq.group_size = static_cast<int>(block.require_int("group_size", "needed to read MLX weights"));
      mq.mode = block.optional_string("mode").value_or("affine");
      return mq;
    };
    s.quantization = read_block(qc);
    for (const auto& [module, value] : q->items()) {
      if (value.is_object()) {
        MlxQuantization o = read_block(ConfigView(value, c.label() + " quantization." + module));
        if (!value.contains("mode")) o.mode = s.quantization->mode;
        s.quantization_overrides[module] = o;
      } else if (value.is_boolean() && !value.get<bool>()) {
        s.quantization_overrides[module] = MlxQuantization{0, 0, s.quantization->mode};
      }
    }
  }
  if (const json* e = c.find("eos_token_id")) add_ids(*e, s.eos_token_ids);
  if (const json* b = c.find("bos_token_id"); b && b->is_number_integer()) s.bos_token_id = b->get<int32_t>();
  return s;
}

std::vector<int32_t> load_eos_token_ids(const std::filesystem::path& dir, const ModelSpec& spec) {
  std::vector<int32_t> ids = spec.eos_token_ids;
  if (auto gen = dir / "generation_config.json"; std::filesystem::exists(gen)) {
    json g = read_json_file(gen);
    if (g.is_object() && g.contains("eos_token_id")) add_ids(g["eos_token_id"], ids);
  }
  // tokenizer_config.json names the eos token by its text; tokenizer.json maps text to id.
  auto tc_path = dir / "tokenizer_config.json";
  auto tok_path = dir / "tokenizer.json";
  if (std::filesystem::exists(tc_path) && std::filesystem::exists(tok_path)) {
    json tc = read_json_file(tc_path);
    std::string eos;
    if (tc.is_object() && tc.contains("eos_token")) {
      const json& e = tc["eos_token"];
      if (e.is_string()) eos = e.get<std::string>();
      if (e.is_object() && e.contains("content") && e["content"].is_string()) eos = e["content"].get<std::string>();
    }
    if (!eos.empty()) {
      json tok = read_json_file(tok_path);
      bool found = false;
      if (tok.contains("added_tokens") && tok["added_tokens"].is_array())
        for (const auto& t : tok["added_tokens"])
          if (t.is_object() && t.value("content", "") == eos && t.contains("id") && t["id"].is_number_integer()) {
            ids.push_back(t["id"].get<int32_t>());
            found = true;
          }
      if (!found && tok.contains("model") && tok["model"].is_object()) {
        const json& vocab = tok["model"].value("vocab", json());
        if (vocab.is_object() && vocab.contains(eos) && vocab[eos].is_number_integer())
          ids.push_back(vocab[eos].get<int32_t>());
      }
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace keel
