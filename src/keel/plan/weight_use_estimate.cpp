#include "keel/plan/weight_use_estimate.h"

#include "keel/plan/tensor_roles.h"

namespace keel::plan {
namespace {

uint64_t u64(int64_t n) { return static_cast<uint64_t>(n); }

uint64_t dtype_size(const std::string& dtype) {
  if (dtype == "bfloat16" || dtype == "float16") return 2;
  if (dtype == "float32") return 4;
  return 0;
}

std::string short_dtype(const std::string& dtype) {
  return dtype == "bfloat16" ? "bf16" : dtype == "float16" ? "f16" : dtype == "float32" ? "f32" : dtype;
}

// mxfp4: 32 weights share one 8-bit scale, so 16 bytes of 4-bit codes + 1 byte per 32 (4.25 bits).
constexpr uint64_t kMxfp4BlockWeights = 32, kMxfp4BlockBytes = 17;

}  // namespace

StorageModel read_storage_model(const ModelSpec& spec, const ConfigView& c) {
  StorageModel s;
  s.mlx = spec.quantization;
  s.mlx_overrides = spec.quantization_overrides;
  std::string dtype = c.optional_string("torch_dtype").value_or(c.optional_string("dtype").value_or(""));
  const auto* qc = c.find("quantization_config");
  const bool has_method = qc && qc->is_object() && qc->contains("quant_method");
  const std::string method = has_method ? qc->value("quant_method", std::string()) : std::string();
  // gpt-oss's config names no dtype; its unquantized tensors (attention, router, embeddings) are bf16.
  if (dtype.empty() && method == "mxfp4") dtype = "bfloat16";
  s.dtype_bytes = dtype_size(dtype);
  const std::string dtype_name = short_dtype(dtype);
  if (spec.quantization) {
    s.description = "MLX " + std::to_string(spec.quantization->bits) + "-bit, group " +
                    std::to_string(spec.quantization->group_size) + " (bf16 scale and bias per group)";
  } else if (qc && qc->is_object() && !has_method) {
    s.unknown = "quantization_config has no quant_method and config.json no MLX 'quantization' block";
  } else if (has_method) {
    if (method == "mxfp4") {
      s.mxfp4_experts = true;
      s.description = "mxfp4 experts at 4.25 bits per weight, the rest " + dtype_name;
    } else {
      // fp8 scale tensors differ in dtype between repos; without the headers keel plan does not guess.
      s.unknown = "the sizes of '" + method + "' tensors are not modelled without the shard headers";
    }
  } else {
    s.description = dtype_name;
  }
  if (s.unknown.empty() && !s.dtype_bytes) s.unknown = "config.json names no torch_dtype for the unquantized tensors";
  return s;
}

std::optional<uint64_t> StorageModel::matrix_bytes(const std::string& module, int64_t rows, int64_t cols,
                                                   bool routed_expert) const {
  if (!unknown.empty()) return std::nullopt;
  if (mlx) {
    MlxQuantization q = *mlx;
    if (auto it = mlx_overrides.find(module); it != mlx_overrides.end()) q = it->second;
    if (q.bits) return u64(rows) * u64(cols) * u64(q.bits) / 8 + u64(rows) * u64(cols / q.group_size) * 2 * 2;
  }
  if (mxfp4_experts && routed_expert) return u64(rows) * u64(cols) / kMxfp4BlockWeights * kMxfp4BlockBytes;
  return u64(rows) * u64(cols) * dtype_bytes;
}

std::optional<WeightBytesByUse> estimate_weight_use(const ModelSpec& spec, const StorageModel& storage, uint64_t total,
                                                    const std::vector<std::string>& tensor_names, std::string& why_not) {
  if (!storage.unknown.empty()) {
    why_not = storage.unknown;
    return std::nullopt;
  }
  // Experts with biases (gpt-oss): gate and up of expert_ffn_dim, down of hidden_size, unquantized.
  bool expert_biases = false;
  for (const auto& n : tensor_names) {
    int64_t layer = -1;
    if (tensor_role(n, layer) == TensorRole::RoutedExpert && n.find("bias") != std::string::npos) expert_biases = true;
  }
  WeightBytesByUse u;
  const int64_t d = spec.hidden_size;
  u.vocab_size = spec.vocab_size;
  u.embedding = *storage.matrix_bytes("model.embed_tokens", spec.vocab_size, d, false);
  u.tied_head = spec.tie_word_embeddings;
  if (!u.tied_head) u.output_head = *storage.matrix_bytes("lm_head", spec.vocab_size, d, false);
  uint64_t skipped = u.embedding + u.output_head;
  for (int64_t i = 0; i < spec.num_layers; ++i) {
    const auto& moe = spec.layers[static_cast<size_t>(i)].moe;
    if (!moe) continue;
    const int64_t ff = moe->expert_ffn_dim;
    // MLX names the stacked experts' modules; per-module overrides are keyed by them.
    const std::string p = "model.layers." + std::to_string(i) + ".mlp.switch_mlp.";
    uint64_t one = *storage.matrix_bytes(p + "gate_proj", ff, d, true) + *storage.matrix_bytes(p + "up_proj", ff, d, true) +
                   *storage.matrix_bytes(p + "down_proj", d, ff, true);
    if (expert_biases) one += u64(2 * ff + d) * storage.dtype_bytes;
    u.routed.push_back({one * u64(moe->experts), moe->experts, moe->experts_per_token});
    skipped += one * u64(moe->experts);
  }
  if (skipped > total) {
    why_not = "the embedding, head and experts sized from config.json need more bytes than the declared total";
    return std::nullopt;
  }
  u.every_token = total - skipped;
  return u;
}

}  // namespace keel::plan
