// Llama 1-3.x and Mistral: RMSNorm, grouped-query attention with rope (Llama 3.1 frequency
// scaling), SwiGLU. Attention bias only where config.json says attention_bias; Mistral's
// sliding_window, when set, makes every layer a sliding one (the generic reading).
#include "keel/arch/family.h"

namespace keel::arch {
namespace {

void refine(const ConfigView&, ModelSpec&) {}  // the generic reading is the Llama reading

TensorNames tensor_names() { return {}; }

}  // namespace

// GGUF llama files hold Mistral's too; their q/k rows are permuted for interleaved rope
// (arch/gguf_model.cpp undoes that through RopeSpec::interleaved).
extern const Family kLlama{"llama", refine, tensor_names, false, "llama", ggml_tensor_names};
extern const Family kMistral{"mistral", refine, tensor_names};

}  // namespace keel::arch
