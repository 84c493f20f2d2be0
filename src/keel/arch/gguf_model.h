#pragma once
// A GGUF model (one .gguf file, or the shards of a split one) as keel runs it: its metadata read
// into the same ModelSpec a Hugging Face config.json gives, and its tensors into the same
// ModelWeights, through the family's refinement and the one loader (model_loader.h). GGUF is another way to fill
// them, not a second engine.
//
// The metadata ({arch}.embedding_length, {arch}.attention.head_count, ...) is translated into the
// config.json keys the generic reader knows, so every family rule applies unchanged; what GGUF
// lays out differently is set here:
//   - llama-architecture q/k rows are permuted for interleaved rope (RopeSpec::interleaved);
//   - there is no YaRN `truncate` key: llama.cpp always rounds the ramp bounds, so keel does too;
//   - tied embeddings are the absence of output.weight; MoE layers are the ones with expert tensors;
//   - Llama 3.1's rope scaling is a tensor, rope_freqs.weight: a divisor per frequency.
// Plain functions; safe on any thread.
#include "keel/model/config_view.h"
#include "keel/model/gguf_file.h"
#include "keel/model/model_spec.h"

namespace keel::arch {

// The config.json equivalent of the file's metadata. Throws keel::Error naming the file and the
// GGUF key for a missing or ill-typed one, or an architecture keel has no family for.
ConfigView gguf_config(const gguf::File& file);

// What the file lays out differently from the checkpoint gguf_config(file) describes, set on a
// spec read from it: llama's interleaved rope, rope_freqs.weight's factors. Throws keel::Error
// naming the file and tensor or key when they conflict or are malformed.
void adjust_for_gguf(const gguf::File& file, ModelSpec& spec);

}  // namespace keel::arch
