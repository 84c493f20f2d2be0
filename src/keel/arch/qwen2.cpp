// Qwen2 and Qwen2.5: the Llama layout with a bias on the q, k and v projections (always, though
// config.json does not say so) and none on the output projection.
#include "keel/arch/family.h"

namespace keel::arch {
namespace {

void refine(const ConfigView&, ModelSpec& spec) {
  for (LayerSpec& l : spec.layers) {
    l.qkv_bias = true;
    l.o_bias = false;
  }
}

TensorNames tensor_names() { return {}; }

}  // namespace

extern const Family kQwen2{"qwen2", refine, tensor_names, false, "qwen2", ggml_tensor_names};

}  // namespace keel::arch
