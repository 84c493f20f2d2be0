#include "keel/plan/weight_format.h"

#include <cstdio>

namespace keel::plan {
namespace {

std::string short_dtype(const std::string& torch_dtype) {
  if (torch_dtype == "bfloat16") return "bf16";
  if (torch_dtype == "float16") return "f16";
  if (torch_dtype == "float32") return "f32";
  return torch_dtype;
}

}  // namespace

std::string describe_weight_format(const ConfigView& c, std::optional<MlxQuantBlock>& mlx) {
  const std::string dtype = short_dtype(c.optional_string("torch_dtype").value_or(c.optional_string("dtype").value_or("")));
  const nlohmann::json& root = c.root();
  const nlohmann::json* q = nullptr;
  if (auto it = root.find("quantization"); it != root.end() && it->is_object()) q = &*it;
  const nlohmann::json* qc = nullptr;
  if (auto it = root.find("quantization_config"); it != root.end() && it->is_object()) qc = &*it;
  // MLX writes the block as "quantization" (and a copy as "quantization_config", without quant_method).
  const nlohmann::json* mlx_block = q ? q : (qc && !qc->contains("quant_method") ? qc : nullptr);
  if (mlx_block) {
    auto bits = mlx_block->find("bits");
    auto group = mlx_block->find("group_size");
    if (bits == mlx_block->end() || !bits->is_number_integer() || bits->get<int64_t>() <= 0) {
      c.fail("quantization", "has no valid 'bits'");
    }
    if (group == mlx_block->end() || !group->is_number_integer() || group->get<int64_t>() <= 0) {
      c.fail("quantization", "has no valid 'group_size'");
    }
    mlx = MlxQuantBlock{bits->get<int64_t>(), group->get<int64_t>()};
    char buf[160];
    std::snprintf(buf, sizeof buf, "MLX affine %lld-bit, group %lld (bf16 scale and bias per group: %.2f bits per weight)",
                  static_cast<long long>(mlx->bits), static_cast<long long>(mlx->group_size), mlx->bits_per_weight());
    return buf;
  }
  if (qc) {
    const std::string method = qc->value("quant_method", std::string("unknown"));
    if (method == "fp8") {
      std::string out = "fp8 " + qc->value("fmt", std::string("e4m3"));
      if (auto b = qc->find("weight_block_size"); b != qc->end() && b->is_array() && b->size() == 2) {
        out += ", scales per " + (*b)[0].dump() + "x" + (*b)[1].dump() + " block";
      }
      return out + (dtype.empty() ? "" : " (unquantized tensors " + dtype + ")");
    }
    if (method == "mxfp4") {
      return "mxfp4 MoE experts (attention, router, embeddings and lm_head " + (dtype.empty() ? "unquantized" : dtype) +
             ")";
    }
    return "quantized (" + method + ")" + (dtype.empty() ? "" : ", unquantized tensors " + dtype);
  }
  return dtype.empty() ? "unknown (config.json names no torch_dtype)" : dtype;
}

}  // namespace keel::plan
