// Qwen3 (dense): the Llama layout plus an RMSNorm over each head of q and k before rope.
#include "keel/arch/family.h"

namespace keel::arch {
namespace {

void refine(const ConfigView&, ModelSpec& spec) {
  for (LayerSpec& l : spec.layers) l.qk_norm = true;
}

TensorNames tensor_names() { return {}; }

}  // namespace

extern const Family kQwen3{"qwen3", refine, tensor_names, false, "qwen3", ggml_tensor_names};

}  // namespace keel::arch
