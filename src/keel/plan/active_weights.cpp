#include "keel/plan/active_weights.h"

#include "keel/model/active_bytes.h"
#include "keel/plan/tensor_roles.h"
#include "keel/plan/weight_use_estimate.h"

namespace keel::plan {

ActiveWeights active_weights(const ModelSpec& spec, const ConfigView& config, const WeightInventory& weights) {
  ActiveWeights a;
  for (const LayerSpec& l : spec.layers) {
    if (!l.moe) continue;
    ++a.moe_layers;
    a.experts = l.moe->experts;
    a.experts_per_token = l.moe->experts_per_token;
  }
  if (!weights.bytes) {
    a.source = "the weight bytes are unknown";
    return a;
  }
  std::optional<WeightBytesByUse> use;
  if (!weights.tensors.empty()) {
    use = weight_use_from_tensors(spec, weights.tensors);
    a.source = "split by tensor name from the safetensors headers";
  } else {
    const StorageModel storage = read_storage_model(spec, config);
    std::string why_not;
    use = estimate_weight_use(spec, storage, *weights.bytes, weights.tensor_names, why_not);
    if (!use) {
      a.source = "unknown: " + why_not;
      return a;
    }
    a.source = "the declared total less the embedding table and unrouted experts sized from config.json: " +
               storage.description;
  }
  const DecodeWeightBytes d = decode_weight_bytes(*use);
  a.active_bytes = d.active;
  for (const RoutedExpertBytes& r : use->routed) a.routed_expert_bytes += r.bytes;
  return a;
}

}  // namespace keel::plan
