#include "keel/kv/kv_layer_groups.h"

#include <algorithm>
#include <string>

#include "keel/kv/kv_window.h"

#include "keel/util/error.h"

namespace keel::kv {
namespace {

// "layer 3", "layers 0-4, 6-10": runs of consecutive layers, so a 62-layer pattern stays readable.
std::string layer_list(const std::vector<int64_t>& layers) {
  std::string out;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + std::to_string(layers[i]);
    if (j > i) out += "-" + std::to_string(layers[j]);
    i = j + 1;
  }
  return (layers.size() == 1 ? "layer " : "layers ") + out;
}

}  // namespace

std::vector<KvLayerGroup> kv_layer_groups(const ModelSpec& spec, int64_t split_at) {
  if (spec.num_layers <= 0 || static_cast<int64_t>(spec.layers.size()) != spec.num_layers)
    throw Error("KV pool: the model spec has " + std::to_string(spec.layers.size()) + " layer descriptions for " +
                std::to_string(spec.num_layers) + " layers");
  std::vector<KvLayerGroup> groups;
  std::vector<int64_t> unstorable[2];  // Mla, SharedKv
  for (int64_t i = 0; i < spec.num_layers; ++i) {
    const LayerSpec& l = spec.layers[static_cast<size_t>(i)];
    switch (l.attention) {
      case AttentionKind::Mla: unstorable[0].push_back(i); continue;
      case AttentionKind::Linear: continue;  // no rows: KvLinearLayers
      case AttentionKind::SharedKv: unstorable[1].push_back(i); continue;
      case AttentionKind::Full:
      case AttentionKind::Sliding: break;
    }
    if (l.num_kv_heads <= 0 || l.head_dim <= 0)
      throw Error("KV pool: layer " + std::to_string(i) + " has no usable attention heads (" +
                  std::to_string(l.num_kv_heads) + " KV heads of " + std::to_string(l.head_dim) + ")");
    if (l.attention == AttentionKind::Sliding && l.window <= 0)
      throw Error("KV pool: sliding-window layer " + std::to_string(i) + " has no window size");
    const int64_t window = l.attention == AttentionKind::Sliding ? l.window : 0;
    KvLayerGroup* group = nullptr;
    for (KvLayerGroup& g : groups)
      if (g.attention == l.attention && g.window == window && g.kv_heads == l.num_kv_heads && g.head_dim == l.head_dim &&
          (g.layers.front() < split_at) == (i < split_at))
        group = &g;
    if (group == nullptr) group = &groups.emplace_back(KvLayerGroup{l.attention, window, l.num_kv_heads, l.head_dim, {}});
    group->layers.push_back(i);
  }
  const char* const names[2] = {"multi-head latent attention", "attention over another layer's KV cache"};
  for (int k = 0; k < 2; ++k)
    if (!unstorable[k].empty())
      throw Error("the KV pool cannot store " + layer_list(unstorable[k]) + " of this " + spec.model_type +
                  " model: they use " + names[k] + ", which keel does not run yet");
  return groups;
}

int64_t KvLinearLayers::index_of(int64_t layer) const {
  for (size_t i = 0; i < layers.size(); ++i)
    if (layers[i] == layer) return static_cast<int64_t>(i);
  return -1;
}

KvLinearLayers kv_linear_layers(const ModelSpec& spec) {
  KvLinearLayers out;
  for (int64_t i = 0; i < static_cast<int64_t>(spec.layers.size()); ++i) {
    const LayerSpec& l = spec.layers[static_cast<size_t>(i)];
    if (l.attention != AttentionKind::Linear) continue;
    if (!l.linear) throw Error("KV pool: linear-attention layer " + std::to_string(i) + " has no state shape");
    const LinearAttentionDims& d = *l.linear;
    const ops::LinearAttentionShape shape{d.key_heads, d.value_heads, d.key_head_dim, d.value_head_dim, d.conv_kernel};
    out.layers.push_back(i);
    out.shapes.push_back(shape);
    out.offsets.push_back(out.snapshot_floats);
    out.snapshot_floats += shape.snapshot_floats();
    out.live_floats += shape.live_floats();
  }
  return out;
}

KvLinearStateBytes kv_linear_state_bytes(const LinearAttentionDims& d) {
  const ops::LinearAttentionShape shape{d.key_heads, d.value_heads, d.key_head_dim, d.value_head_dim, d.conv_kernel};
  return {shape.live_floats() * static_cast<int64_t>(sizeof(float)), shape.snapshot_floats() * static_cast<int64_t>(sizeof(float))};
}

int64_t kv_state_snapshots(int64_t tokens, int64_t interval) {
  const int64_t blocks = tokens / kKvBlockTokens;
  return std::min<int64_t>(blocks, 3) + blocks / interval;
}

}  // namespace keel::kv
