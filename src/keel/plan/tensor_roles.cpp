#include "keel/plan/tensor_roles.h"

#include <cctype>
#include <map>

namespace keel::plan {
namespace {

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// The N of the first "layers.N." (GGUF: a leading "blk.N.") in the name; -1 when there is none.
int64_t layer_number(const std::string& name) {
  if (name.rfind("blk.", 0) == 0) {
    size_t j = 4;
    while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j]))) ++j;
    if (j > 4 && j < name.size() && name[j] == '.') return std::stoll(name.substr(4, j - 4));
  }
  for (size_t at = name.find("layers."); at != std::string::npos; at = name.find("layers.", at + 1)) {
    if (at > 0 && name[at - 1] != '.') continue;  // "...extra_layers." is not the decoder's list
    size_t i = at + 7, j = i;
    while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j]))) ++j;
    if (j > i && j < name.size() && name[j] == '.') return std::stoll(name.substr(i, j - i));
  }
  return -1;
}

}  // namespace

TensorRole tensor_role(const std::string& name, int64_t& layer) {
  layer = -1;
  // Other modalities first: a vision tower has layers, norms and embeddings of its own.
  if (has(name, "vision") || has(name, "audio") || has(name, "multi_modal_projector")) return TensorRole::NotDecoded;
  if (has(name, "embed_tokens.") || name.rfind("token_embd.", 0) == 0) return TensorRole::Embedding;
  if (name.rfind("lm_head.", 0) == 0 || has(name, ".lm_head.") || name.rfind("output.", 0) == 0) return TensorRole::OutputHead;
  // GGUF stacks a layer's routed experts as blk.N.ffn_{gate,up,down}_exps (shared: _shexp).
  if (has(name, ".experts.") || has(name, ".switch_mlp.") || has(name, "_exps.")) {
    layer = layer_number(name);
    if (layer >= 0) return TensorRole::RoutedExpert;
  }
  return TensorRole::EveryToken;
}

WeightBytesByUse weight_use_from_tensors(const ModelSpec& spec,
                                         const std::vector<std::pair<std::string, uint64_t>>& tensors) {
  WeightBytesByUse u;
  u.vocab_size = spec.vocab_size;
  std::map<int64_t, uint64_t> routed;  // layer -> bytes of all its routed experts
  for (const auto& [name, bytes] : tensors) {
    int64_t layer = -1;
    switch (tensor_role(name, layer)) {
      case TensorRole::Embedding: u.embedding += bytes; break;
      case TensorRole::OutputHead: u.output_head += bytes; break;
      case TensorRole::NotDecoded: u.not_decoded += bytes; break;
      case TensorRole::EveryToken: u.every_token += bytes; break;
      case TensorRole::RoutedExpert:
        if (layer < spec.num_layers && spec.layers[static_cast<size_t>(layer)].moe) {
          routed[layer] += bytes;
        } else {
          u.every_token += bytes;
        }
        break;
    }
  }
  // Without an lm_head tensor the embedding table is the head (tie_word_embeddings).
  u.tied_head = u.output_head == 0;
  for (const auto& [layer, bytes] : routed) {
    const MoeSpec& m = *spec.layers[static_cast<size_t>(layer)].moe;
    u.routed.push_back({bytes, m.experts, m.experts_per_token});
  }
  return u;
}

}  // namespace keel::plan
