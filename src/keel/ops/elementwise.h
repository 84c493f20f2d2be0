#pragma once
// The small per-token operations of a transformer block. They touch O(hidden) values per token,
// so plain loops (auto-vectorised) are enough; the matrix products dominate.
// The free functions are pure functions of their arguments (the caller owns every buffer): any thread.
// A Rope is immutable after construction; apply() uses thread-local scratch, so many threads may call it
// on one Rope at once.
#include <cmath>
#include <cstdint>
#include <vector>

#include "keel/model/model_spec.h"

namespace keel::ops {

// out = x / sqrt(mean(x^2) + eps) * weight, over `n` values (in place allowed). With
// NormKind::RmsUnitOffset the weight is stored as an offset from one: * (1 + weight). A null
// weight scales by nothing (Gemma 4's value and router norms).
void rms_norm(const float* x, const float* weight, int64_t n, double eps, float* out,
              NormKind kind = NormKind::Rms);

// out[i] = act(gate[i]) * up[i]: the gated FFN's nonlinearity (SwiGLU, GeGLU).
void gated_activation(Activation act, const float* gate, const float* up, int64_t n, float* out);

// gpt-oss's expert activation over fused rows: for each of `n` rows of 2*ff values, gate = the
// even entries clamped above at `limit`, up = the odd ones clamped to +-limit, and
// out[i] = (up + 1) * gate * sigmoid(1.702 * gate); out is (n, ff) and may alias gate_up.
void clamped_swiglu(const float* gate_up, int64_t n, int64_t ff, float limit, float* out);

// x[i] = cap * tanh(x[i] / cap): Gemma's logit soft-capping.
void softcap_inplace(float* x, int64_t n, float cap);

void add_inplace(float* x, const float* y, int64_t n);

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// log(1 + e^x), and x itself above 20 where that is exact in f32 (torch's threshold).
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// Rotary position embedding in the Hugging Face "rotate half" layout: dimension i pairs with
// i + head_dim/2. Frequencies follow the layer's theta and rope scaling (linear: positions divided
// by the factor; Llama 3 and YaRN: low frequencies divided, high ones kept, a blend between;
// YaRN also scales cos and sin by its attention factor).
class Rope {
 public:
  Rope(const RopeSpec& spec, int64_t head_dim);
  // Rotates `n_heads` consecutive heads of `x` in place for position `pos`.
  void apply(float* x, int64_t n_heads, int64_t pos) const;

  const std::vector<double>& inv_freq() const { return inv_freq_; }

 private:
  int64_t head_dim_;
  int64_t rotary_dim_;  // the leading dimensions of each head that turn (RopeSpec::rotary_dim)
  std::vector<double> inv_freq_;
  double scale_ = 1.0;  // multiplies cos and sin
  bool interleaved_ = false;  // RopeSpec::interleaved
};

}  // namespace keel::ops
