#pragma once
// Which weight bytes a decode step reads, as one rule for every caller: `keel plan` (from
// safetensors headers or the shapes in config.json) and the loaded ModelWeights (bench, serve).
// Callers measure the bytes of each part their own way; what counts as read is decided here only.
//
// A decode step reads:
//   - every tensor of every layer except the routed experts (attention, norms, biases, the router,
//     a dense FFN, shared experts),
//   - of each MoE layer's routed experts, experts_per_token of its `experts` (they share a shape),
//   - the output head whole (the embedding table when tied),
//   - one row of the input embedding table (the token's own),
// and never the towers of other modalities (a vision encoder) while decoding text.
//
// Plain data and a pure function: safe from any thread.
#include <cstdint>
#include <vector>

namespace keel {

// One MoE layer's routed experts, all of them together.
struct RoutedExpertBytes {
  uint64_t bytes = 0;
  int64_t experts = 0;
  int64_t experts_per_token = 0;
};

// A model's weight bytes split by how a decode step uses them.
struct WeightBytesByUse {
  uint64_t embedding = 0;    // the input embedding table
  int64_t vocab_size = 0;    // its rows
  bool tied_head = false;    // the embedding table is also the output head
  uint64_t output_head = 0;  // lm_head; 0 when tied
  uint64_t every_token = 0;  // read whole by every step: layers less routed experts, final norm
  uint64_t not_decoded = 0;  // resident but not read by a text decode step (vision/audio towers)
  std::vector<RoutedExpertBytes> routed;  // one per MoE layer
};

struct DecodeWeightBytes {
  uint64_t resident = 0;  // every byte above: what must be in memory
  uint64_t active = 0;    // what one decode step reads (the rule in the file comment)
};

DecodeWeightBytes decode_weight_bytes(const WeightBytesByUse& parts);

}  // namespace keel
