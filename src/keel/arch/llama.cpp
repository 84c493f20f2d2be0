// Llama 1-3.x and Mistral: RMSNorm, grouped-query attention with rope (Llama 3.1 frequency
// scaling), SwiGLU. Attention bias only where config.json says attention_bias; Mistral's
// sliding_window, when set, makes every layer a sliding one (the generic reading).
#include "keel/arch/family.h"

namespace keel::arch {
namespace {

void refine(const ConfigView&, ModelSpec&) {}  // the generic reading is the Llama reading

TensorNames tensor_names() { return {}; }

}  // namespace

extern const Family kLlama{"llama", refine, tensor_names};
extern const Family kMistral{"mistral", refine, tensor_names};

}  // namespace keel::arch
