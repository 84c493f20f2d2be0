#pragma once
// Total vs active weight bytes for `keel plan`: what must be resident, and what one decode step
// reads (model/active_bytes.h has the rule, shared with the loaded weights that bench measures).
// For a mixture-of-experts model the two differ by the experts a token is not routed to.
#include <cstdint>
#include <optional>
#include <string>

#include "keel/model/config_view.h"
#include "keel/model/model_spec.h"
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

// From the inventory's tensors when the headers were read (exact for any format), else from the
// spec's shapes against the declared total. Unknown when the weight bytes are.
ActiveWeights active_weights(const ModelSpec& spec, const ConfigView& config, const WeightInventory& weights);

}  // namespace keel::plan
