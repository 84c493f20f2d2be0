#include "keel/plan/active_weights.h"

#include "keel/model/active_bytes.h"
#include "keel/plan/tensor_roles.h"

namespace keel::plan {
namespace {

const FormatWeights* configured_format(const ShapeWeights& shapes) {
  for (const FormatWeights& f : shapes.formats)
    if (f.configured) return &f;
  return nullptr;
}

}  // namespace

ActiveWeights active_weights(const ModelSpec& spec, const WeightInventory& files, const ShapeWeights& shapes,
                             const FormatWeights* computed) {
  ActiveWeights a;
  for (const LayerSpec& l : spec.layers) {
    if (!l.moe) continue;
    ++a.moe_layers;
    a.experts = l.moe->experts;
    a.experts_per_token = l.moe->experts_per_token;
  }
  if (!computed && !files.tensors.empty()) {
    const DecodeWeightBytes d = decode_weight_bytes(weight_use_from_tensors(spec, files.tensors));
    a.active_bytes = d.active;
    for (const RoutedExpertBytes& r : weight_use_from_tensors(spec, files.tensors).routed) a.routed_expert_bytes += r.bytes;
    a.source = "split by tensor name from the files' tensor headers";
    return a;
  }
  const FormatWeights* f = computed;
  if (!f && files.bytes) {
    f = configured_format(shapes);
    if (!f) {
      a.source = "unknown: the files' format is not modelled from config.json" +
                 (shapes.unavailable.empty() ? std::string() : " (" + shapes.unavailable + ")");
      return a;
    }
  }
  if (!f) {
    a.source = "the weight bytes are unknown";
    return a;
  }
  a.active_bytes = f->active_bytes;
  a.routed_expert_bytes = f->routed_expert_bytes;
  a.source = "from config.json's shapes as " + f->format.name() + " (" + shapes.tensor_source + ")";
  return a;
}

}  // namespace keel::plan
