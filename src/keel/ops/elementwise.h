#pragma once
// The small per-token operations of a transformer block. They touch O(hidden) values per token,
// so plain loops (auto-vectorised) are enough; the matrix products dominate.
#include <cstdint>
#include <vector>

#include "keel/model/model_spec.h"

namespace keel::ops {

// out = x / sqrt(mean(x^2) + eps) * weight, over `n` values (in place allowed).
void rms_norm(const float* x, const float* weight, int64_t n, double eps, float* out);

// out[i] = silu(gate[i]) * up[i]
void silu_mul(const float* gate, const float* up, int64_t n, float* out);

void add_inplace(float* x, const float* y, int64_t n);

// Rotary position embedding in the Hugging Face "rotate half" layout: dimension i pairs with
// i + head_dim/2. Frequencies follow rope_theta and, for Llama 3, its rope_scaling.
class Rope {
 public:
  explicit Rope(const ModelSpec& spec);
  // Rotates `n_heads` consecutive heads of `x` in place for position `pos`.
  void apply(float* x, int64_t n_heads, int64_t pos) const;

  const std::vector<double>& inv_freq() const { return inv_freq_; }

 private:
  int64_t head_dim_;
  std::vector<double> inv_freq_;
};

}  // namespace keel::ops
