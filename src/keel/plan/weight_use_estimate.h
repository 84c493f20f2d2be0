#pragma once
// The active-bytes split when only the index's metadata.total_size is known (the shards are not in
// the folder): the parts a decode step skips, the embedding table and the routed experts, are
// sized from the spec's shapes and the storage format config.json declares; every_token is the
// declared total less them. Anchoring to the total keeps the estimate to the few shapes keel plan
// knows exactly; attention of any kind (MLA, linear) needs no model of its own.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "keel/model/active_bytes.h"
#include "keel/model/config_view.h"
#include "keel/model/model_spec.h"

namespace keel::plan {

// How config.json says a (rows x cols) matrix is stored, as bytes.
struct StorageModel {
  std::string unknown;  // set: the format is not modelled (why)
  std::string description;  // "bf16", "MLX 4-bit group 64", "mxfp4 experts (4.25 bits per weight)"
  // nullopt when the format is not modelled. `routed_expert`: mxfp4 quantizes only the experts.
  std::optional<uint64_t> matrix_bytes(const std::string& module, int64_t rows, int64_t cols, bool routed_expert) const;

  std::optional<MlxQuantization> mlx;  // with its per-module overrides
  std::map<std::string, MlxQuantization> mlx_overrides;
  uint64_t dtype_bytes = 0;  // unquantized tensors; 0: unknown dtype
  bool mxfp4_experts = false;
};
StorageModel read_storage_model(const ModelSpec& spec, const ConfigView& config);

// `total` is the declared weight bytes; `tensor_names` the index's names (they tell whether the
// experts carry biases). nullopt with `why_not` set when the format is not modelled or the
// shapes need more than the declared total.
std::optional<WeightBytesByUse> estimate_weight_use(const ModelSpec& spec, const StorageModel& storage, uint64_t total,
                                                    const std::vector<std::string>& tensor_names, std::string& why_not);

}  // namespace keel::plan
