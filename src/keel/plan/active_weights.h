#pragma once
// Total vs active weight bytes for `keel plan`: what must be resident, and what one decode step
// reads (model/active_bytes.h has the rule, shared with the loaded weights that bench measures).
// For a mixture-of-experts model the two differ by the experts a token is not routed to.
//
// Plain data and a pure function: safe from any thread.
#include <cstdint>
#include <optional>
#include <string>

#include "keel/model/model_spec.h"
#include "keel/plan/shape_weights.h"
#include "keel/plan/weight_inventory.h"

namespace keel::plan {

struct ActiveWeights {
  std::optional<uint64_t> active_bytes;  // per decoded token; nullopt: unknown (see `source`)
  uint64_t routed_expert_bytes = 0;      // resident bytes of all routed experts
  std::string source;                    // how the split was measured, or why it is unknown
  // The model's MoE shape, for the text: "8 of 128 experts in 48 layers". moe_layers 0: dense.
  int64_t moe_layers = 0;
  int64_t experts = 0;
  int64_t experts_per_token = 0;
};

// `computed`: the plan's weight bytes come from config.json's shapes in this format (no files, or
// --weights asked for another format than the files'); the split is then the format's. Otherwise
// from the headers' tensors (exact for any format) or, with only the index's declared total, from
// the shapes in the format config.json declares when keel plan models it.
ActiveWeights active_weights(const ModelSpec& spec, const WeightInventory& files, const ShapeWeights& shapes,
                             const FormatWeights* computed);

}  // namespace keel::plan
