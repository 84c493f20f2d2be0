#include "keel/ops/elementwise.h"

#include <cmath>
#include <numbers>

namespace keel::ops {

void rms_norm(const float* x, const float* weight, int64_t n, double eps, float* out, NormKind kind) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  if (kind == NormKind::RmsUnitOffset) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv * (1.0f + weight[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv * weight[i];
  }
}

void gated_activation(Activation act, const float* gate, const float* up, int64_t n, float* out) {
  switch (act) {
    case Activation::Silu:
      for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
      break;
    case Activation::GeluTanh: {
      // 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))), PyTorch's approximate="tanh"
      const float k = static_cast<float>(std::sqrt(2.0 / std::numbers::pi));
      for (int64_t i = 0; i < n; ++i) {
        const float g = gate[i];
        out[i] = 0.5f * g * (1.0f + std::tanh(k * (g + 0.044715f * g * g * g))) * up[i];
      }
      break;
    }
  }
}

void softcap_inplace(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

void add_inplace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

Rope::Rope(const RopeSpec& spec, int64_t head_dim) : head_dim_(head_dim) {
  const int64_t half = head_dim_ / 2;
  inv_freq_.resize(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    inv_freq_[static_cast<size_t>(i)] = std::pow(spec.theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim_));

  const RopeScaling& rs = spec.scaling;
  if (rs.kind == RopeScaling::Kind::Linear)
    for (double& f : inv_freq_) f /= rs.factor;
  if (rs.kind == RopeScaling::Kind::Llama3) {
    // Llama 3.1: keep high frequencies, divide low ones by `factor`, blend smoothly in between.
    const double old_len = static_cast<double>(rs.original_max_position);
    const double low_wavelen = old_len / rs.low_freq_factor;
    const double high_wavelen = old_len / rs.high_freq_factor;
    for (double& f : inv_freq_) {
      const double wavelen = 2.0 * std::numbers::pi / f;
      if (wavelen < high_wavelen) continue;
      if (wavelen > low_wavelen) {
        f /= rs.factor;
      } else {
        const double smooth = (old_len / wavelen - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor);
        f = (1.0 - smooth) * f / rs.factor + smooth * f;
      }
    }
  }
}

void Rope::apply(float* x, int64_t n_heads, int64_t pos) const {
  const int64_t half = head_dim_ / 2;
  thread_local std::vector<float> cos_t, sin_t;
  cos_t.resize(static_cast<size_t>(half));
  sin_t.resize(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const double angle = static_cast<double>(pos) * inv_freq_[static_cast<size_t>(i)];
    cos_t[static_cast<size_t>(i)] = static_cast<float>(std::cos(angle));
    sin_t[static_cast<size_t>(i)] = static_cast<float>(std::sin(angle));
  }
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim_;
    for (int64_t i = 0; i < half; ++i) {
      const float a = v[i], b = v[i + half];
      const float c = cos_t[static_cast<size_t>(i)], s = sin_t[static_cast<size_t>(i)];
      v[i] = a * c - b * s;
      v[i + half] = b * c + a * s;
    }
  }
}

}  // namespace keel::ops
