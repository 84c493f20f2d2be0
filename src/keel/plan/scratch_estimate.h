#pragma once
// Memory the engine needs besides weights and KV: activations of one prefill chunk, attention
// score tiles, the logits, and a fixed runtime allowance. It is an estimate (the engine's buffers
// are sized by the same chunk and tile constants) and is small next to weights and KV; the plan
// shows it separately so nobody mistakes it for a measured number.
#include <cstdint>

#include "keel/plan/attention_layout.h"
#include "keel/model/model_spec.h"

namespace keel::plan {

inline constexpr int64_t kPrefillChunkTokens = 512;  // prompt tokens processed per forward pass
inline constexpr int64_t kAttentionKeyTile = 256;    // keys per score tile (tiled attention)
inline constexpr uint64_t kRuntimeOverheadBytes = 256ull << 20;  // code, tokenizer, HTTP, threads

struct ScratchEstimate {
  uint64_t activations = 0;      // f32, one chunk: residual, q/k/v, attention out, FFN, router, routed slots
  uint64_t attention_tiles = 0;  // f32 scores: heads x chunk x tile
  uint64_t logits = 0;           // f32 logits and sampling probabilities for one position
  uint64_t runtime = kRuntimeOverheadBytes;
  uint64_t total() const { return activations + attention_tiles + logits + runtime; }
};

ScratchEstimate estimate_scratch(const ModelSpec& spec, const AttentionLayout& layout);

}  // namespace keel::plan
