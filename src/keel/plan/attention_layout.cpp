#include "keel/plan/attention_layout.h"

#include <string>

#include "keel/util/error.h"
#include "keel/plan/number_format.h"

namespace keel::plan {
namespace {

constexpr std::string_view kKvWhy = "needed for the KV size";

// Decides full / sliding / linear for each layer from whichever key the config family uses.
std::vector<LayerKind> read_layer_kinds(const ConfigView& c, int64_t num_layers, std::string& source) {
  std::vector<LayerKind> kinds(static_cast<size_t>(num_layers), LayerKind::FullAttention);

  if (const nlohmann::json* types = c.find("layer_types")) {
    if (!types->is_array()) c.fail("layer_types", "must be a list of layer kinds");
    if (static_cast<int64_t>(types->size()) != num_layers) {
      c.fail("layer_types", "has " + std::to_string(types->size()) + " entries but num_hidden_layers is " +
                                std::to_string(num_layers));
    }
    for (size_t i = 0; i < types->size(); ++i) {
      const nlohmann::json& t = (*types)[i];
      std::string name = t.is_string() ? t.get<std::string>() : t.dump();
      if (name == "full_attention") {
        kinds[i] = LayerKind::FullAttention;
      } else if (name == "sliding_attention") {
        kinds[i] = LayerKind::SlidingAttention;
      } else if (name == "linear_attention") {
        kinds[i] = LayerKind::LinearAttention;
      } else {
        c.fail("layer_types", "entry " + std::to_string(i) + " is '" + name +
                                  "', a layer kind keel plan does not know (known: full_attention, "
                                  "sliding_attention, linear_attention)");
      }
    }
    source = "layer_types";
    return kinds;
  }

  if (auto interval = c.optional_int("full_attention_interval")) {
    if (*interval <= 0) c.fail("full_attention_interval", "must be positive");
    for (int64_t i = 0; i < num_layers; ++i) {
      kinds[i] = (i + 1) % *interval == 0 ? LayerKind::FullAttention : LayerKind::LinearAttention;
    }
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
    for (int64_t i = 0; i < num_layers; ++i) {
      kinds[i] = (i + 1) % *pattern == 0 ? LayerKind::FullAttention : LayerKind::SlidingAttention;
    }
    source = "sliding_window_pattern = " + std::to_string(*pattern);
  } else if (model_type == "gemma2") {
    for (int64_t i = 0; i < num_layers; ++i) {
      kinds[i] = i % 2 == 0 ? LayerKind::SlidingAttention : LayerKind::FullAttention;
    }
    source = "gemma2: even layers sliding";
  } else if (auto full_layers = c.optional_int("max_window_layers"); full_layers && model_type.rfind("qwen", 0) == 0) {
    for (int64_t i = *full_layers; i < num_layers; ++i) kinds[i] = LayerKind::SlidingAttention;
    source = "use_sliding_window: layers from max_window_layers = " + std::to_string(*full_layers) + " on";
  } else {
    for (auto& k : kinds) k = LayerKind::SlidingAttention;
    source = "sliding_window on every layer";
  }
  return kinds;
}

struct AttentionDims {
  int64_t kv_heads;
  int64_t head_dim;
};

AttentionDims attention_dims(const ConfigView& c, bool full_layer) {
  const int64_t heads = c.require_int("num_attention_heads", kKvWhy);
  AttentionDims d{c.optional_int("num_key_value_heads").value_or(heads), 0};
  if (auto hd = c.optional_int("head_dim")) {
    d.head_dim = *hd;
  } else {
    const int64_t hidden = c.require_int("hidden_size", "needed for head_dim = hidden_size / num_attention_heads");
    if (hidden % heads != 0) {
      c.fail("hidden_size", "is not a multiple of num_attention_heads and no head_dim is given");
    }
    d.head_dim = hidden / heads;
  }
  // Gemma 4: the global (full-attention) layers have their own head size, and with
  // attention_k_eq_v their own KV head count. Values come from the key projection but are normed
  // differently and not rotated, so K and V are still cached separately.
  if (full_layer) {
    if (auto ghd = c.optional_int("global_head_dim")) d.head_dim = *ghd;
    if (c.optional_bool("attention_k_eq_v").value_or(false)) {
      if (auto gkv = c.optional_int("num_global_key_value_heads")) d.kv_heads = *gkv;
    }
  }
  if (d.kv_heads <= 0) c.fail("num_key_value_heads", "must be positive");
  if (d.head_dim <= 0) c.fail("head_dim", "must be positive");
  return d;
}

LayerShape attention_shape(const ConfigView& c, LayerKind kind) {
  LayerShape s;
  s.kind = kind;
  AttentionDims d = attention_dims(c, kind == LayerKind::FullAttention);
  s.per_token = {{2 * d.kv_heads, d.head_dim}};
  s.description = std::to_string(d.kv_heads) + " KV heads x " + std::to_string(d.head_dim) + ", K and V";
  if (kind == LayerKind::SlidingAttention) {
    s.window = c.require_int("sliding_window", "needed for the sliding-window layers");
    s.description += ", window " + format_count(s.window);
  }
  return s;
}

// DeepSeek-V2/V3 and Kimi K2 cache the compressed KV latent plus one shared rotary key per token.
// DeepSeek-V3.2 adds its sparse-attention indexer's key (index_head_dim, one head).
LayerShape mla_shape(const ConfigView& c) {
  constexpr std::string_view why = "needed for the MLA KV size";
  LayerShape s;
  s.kind = LayerKind::Mla;
  const int64_t latent = c.require_int("kv_lora_rank", why);
  const int64_t rope = c.require_int("qk_rope_head_dim", why);
  s.per_token = {{1, latent}, {1, rope}};
  s.description = "latent " + std::to_string(latent) + " + rope key " + std::to_string(rope);
  if (c.has("index_topk")) {
    const int64_t index_dim = c.require_int("index_head_dim", "needed for the sparse-attention indexer keys");
    s.per_token.push_back({1, index_dim});
    s.description += " + indexer key " + std::to_string(index_dim);
  }
  return s;
}

// Gated DeltaNet (Qwen3-Next, Qwen3.5): per value head a d_k x d_v state matrix, plus the last
// (kernel - 1) inputs of the short convolution over q, k and v.
LayerShape linear_shape(const ConfigView& c) {
  constexpr std::string_view why = "needed for the linear-attention state of a hybrid model";
  LayerShape s;
  s.kind = LayerKind::LinearAttention;
  const int64_t v_heads = c.require_int("linear_num_value_heads", why);
  const int64_t k_heads = c.require_int("linear_num_key_heads", why);
  const int64_t k_dim = c.require_int("linear_key_head_dim", why);
  const int64_t v_dim = c.require_int("linear_value_head_dim", why);
  const int64_t kernel = c.require_int("linear_conv_kernel_dim", why);
  const int64_t recurrent = v_heads * k_dim * v_dim;
  const int64_t conv_channels = 2 * k_heads * k_dim + v_heads * v_dim;
  const int64_t conv = (kernel - 1) * conv_channels;
  s.fixed_state_bytes = (recurrent + conv) * kLinearStateElementBytes;
  s.description = "f32 state " + std::to_string(v_heads) + "x" + std::to_string(k_dim) + "x" + std::to_string(v_dim) +
                  " + conv " + std::to_string(kernel - 1) + "x" + std::to_string(conv_channels);
  return s;
}

}  // namespace

std::string_view layer_kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::FullAttention: return "full attention";
    case LayerKind::SlidingAttention: return "sliding window";
    case LayerKind::Mla: return "MLA";
    case LayerKind::LinearAttention: return "linear attention";
    case LayerKind::SharedKv: return "shared KV";
  }
  return "?";
}

AttentionLayout read_attention_layout(const ConfigView& c) {
  AttentionLayout layout;
  layout.num_layers = c.require_int("num_hidden_layers", kKvWhy);
  std::vector<LayerKind> kinds = read_layer_kinds(c, layout.num_layers, layout.layer_pattern_source);

  // Gemma 3n/4: the last num_kv_shared_layers layers attend over an earlier layer's cache.
  if (auto shared = c.optional_int("num_kv_shared_layers"); shared && *shared > 0) {
    if (*shared > layout.num_layers) c.fail("num_kv_shared_layers", "is larger than num_hidden_layers");
    for (int64_t i = layout.num_layers - *shared; i < layout.num_layers; ++i) kinds[i] = LayerKind::SharedKv;
  }
  const bool mla = c.has("kv_lora_rank");

  for (LayerKind kind : kinds) {
    LayerShape shape;
    if (kind == LayerKind::SharedKv) {
      shape.kind = kind;
      shape.description = "reads an earlier layer's KV";
    } else if (kind == LayerKind::LinearAttention) {
      shape = linear_shape(c);
    } else if (mla) {
      shape = mla_shape(c);
    } else {
      shape = attention_shape(c, kind);
    }
    bool merged = false;
    for (auto& g : layout.groups) {
      if (g.shape == shape) {
        ++g.layers;
        merged = true;
        break;
      }
    }
    if (!merged) layout.groups.push_back({std::move(shape), 1});
  }
  return layout;
}

}  // namespace keel::plan
