#include "keel/plan/attention_layout.h"

#include <string>

#include "keel/arch/model_loader.h"
#include "keel/kv/kv_layer_groups.h"
#include "keel/plan/number_format.h"

namespace keel::plan {
namespace {

// What one layer keeps, from its LayerSpec (the one model description: model/model_spec.h).
LayerShape layer_shape(const LayerSpec& l) {
  LayerShape s;
  s.kind = l.attention;
  switch (l.attention) {
    case AttentionKind::Full:
    case AttentionKind::Sliding:
      s.per_token = {{2 * l.num_kv_heads, l.head_dim}};
      s.description = std::to_string(l.num_kv_heads) + " KV heads x " + std::to_string(l.head_dim) + ", K and V";
      if (l.attention == AttentionKind::Sliding) {
        s.window = l.window;
        s.description += ", window " + format_count(s.window);
      }
      break;
    case AttentionKind::Mla: {
      // DeepSeek-V2/V3 and Kimi K2 cache the compressed KV latent plus one shared rotary key per
      // token; DeepSeek-V3.2 adds its sparse-attention indexer's key.
      const MlaDims& m = *l.mla;
      s.per_token = {{1, m.kv_lora_rank}, {1, m.qk_rope_head_dim}};
      s.description = "latent " + std::to_string(m.kv_lora_rank) + " + rope key " + std::to_string(m.qk_rope_head_dim);
      if (m.index_head_dim) {
        s.per_token.push_back({1, m.index_head_dim});
        s.description += " + indexer key " + std::to_string(m.index_head_dim);
      }
      break;
    }
    case AttentionKind::Linear: {
      // Gated DeltaNet (Qwen3-Next, Qwen3.5): per value head a d_k x d_v state matrix, plus the
      // last (kernel - 1) inputs of the short convolution over q, k and v.
      // The state is f32: it accumulates over the whole sequence and is never quantized, so it
      // does not depend on the KV policy. Live, it also holds the current tile's keys and values.
      const LinearAttentionDims& d = *l.linear;
      const int64_t conv_channels = 2 * d.key_heads * d.key_head_dim + d.value_heads * d.value_head_dim;
      const kv::KvLinearStateBytes bytes = kv::kv_linear_state_bytes(d);
      s.fixed_state_bytes = bytes.live;
      s.snapshot_bytes = bytes.snapshot;
      s.description = "f32 state " + std::to_string(d.value_heads) + "x" + std::to_string(d.key_head_dim) + "x" +
                      std::to_string(d.value_head_dim) + " + conv " + std::to_string(d.conv_kernel - 1) + "x" +
                      std::to_string(conv_channels);
      break;
    }
    case AttentionKind::SharedKv:
      s.description = "reads an earlier layer's KV";
      break;
  }
  return s;
}

}  // namespace

AttentionLayout read_attention_layout(const ModelSpec& spec) {
  AttentionLayout layout;
  layout.num_layers = spec.num_layers;
  layout.layer_pattern_source = spec.layer_pattern_source;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    LayerShape shape = layer_shape(spec.layers[i]);
    bool merged = false;
    for (auto& g : layout.groups) {
      if (g.shape == shape) {
        ++g.layers;
        g.layer_ids.push_back(static_cast<int64_t>(i));
        merged = true;
        break;
      }
    }
    if (!merged) layout.groups.push_back({std::move(shape), 1, {static_cast<int64_t>(i)}});
  }
  return layout;
}

AttentionLayout read_attention_layout(const ConfigView& config) { return read_attention_layout(arch::describe_spec(config)); }

}  // namespace keel::plan
