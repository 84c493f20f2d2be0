#pragma once
// Writes a random-weight model folder (or one GGUF file) with the exact tensor names, shapes and storage format of a
// real config.json, so speed can be measured at real sizes without downloading weights. The tensors
// are the ones the family's loader reads (arch/checkpoint_tensors.h), Qwen3-Next's Gated DeltaNet
// layers and shared expert included; gpt-oss's experts are MXFP4 as OpenAI ships them. A plain
// function; any thread.
#include <cstdint>
#include <filesystem>
#include <functional>

#include "keel/model/gguf_writer.h"
#include "keel/model/weights.h"

namespace keel {

struct SynthOptions {
  WeightFormat format = WeightFormat::BF16;  // BF16, F16, F32, MLX4 or MLX8
  int mlx_group_size = 64;
  uint64_t seed = 1;
  int64_t layers = 0;  // > 0: keep only the first `layers` decoder layers (a cheaper bench model)
};

// Reads `config_json`, writes `out_dir`/config.json (with a quantization block for MLX formats)
// and `out_dir`/model.safetensors. Returns the bytes written for weights.
uint64_t synthesize_model(const std::filesystem::path& config_json, const std::filesystem::path& out_dir,
                          const SynthOptions& options);

// The same random weights (same seed, same values) as one GGUF file with llama.cpp's conventions,
// so llama.cpp loads it and llama-quantize can quantize it: general.architecture and the
// {arch}.* shape keys of arch/gguf_keys.h, ggml tensor names (token_embd, blk.N.attn_q, ...),
// matrices in the --dtype (BF16, F16 or F32), norms and biases in F32, llama-architecture q/k
// rows permuted for interleaved rope (qwen2/qwen3 are not), no output.weight when the embeddings
// are tied. `add_tokenizer` adds the tokenizer.* keys (the model's vocab_size is the embedding's
// row count, which llama.cpp wants tokens for); without it the file has no tokenizer. llama, qwen2
// and qwen3 models, and qwen3_moe with its per-expert matrices stacked as llama.cpp's
// blk.N.ffn_{gate,up,down}_exps; anything else is refused by name. The file is written one tensor
// (one layer's experts) in memory at a time. Returns the bytes of tensor data.
using GgufMetadataHook = std::function<void(gguf::Writer&, int64_t vocab_size)>;
uint64_t synthesize_gguf(const std::filesystem::path& config_json, const std::filesystem::path& out_file,
                         const SynthOptions& options, const GgufMetadataHook& add_tokenizer = {});

}  // namespace keel
