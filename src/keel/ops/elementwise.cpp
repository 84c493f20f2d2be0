#include "keel/ops/elementwise.h"

#include "keel/util/error.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace keel::ops {

void rms_norm(const float* x, const float* weight, int64_t n, double eps, float* out, NormKind kind) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  if (weight == nullptr) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv;
  } else if (kind == NormKind::RmsUnitOffset) {
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

void clamped_swiglu(const float* gate_up, int64_t n, int64_t ff, float limit, float* out) {
  constexpr float kAlpha = 1.702f;
  // Row t's outputs end before row t's inputs do, and row t+1's inputs lie after them: in place is safe.
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < ff; ++i) {
      const float gate = std::min(gate_up[t * 2 * ff + 2 * i], limit);
      const float up = std::clamp(gate_up[t * 2 * ff + 2 * i + 1], -limit, limit);
      out[t * ff + i] = (up + 1.0f) * (gate / (1.0f + std::exp(-kAlpha * gate)));
    }
}

void softcap_inplace(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

void add_inplace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

Rope::Rope(const RopeSpec& spec, int64_t head_dim)
    : head_dim_(head_dim), rotary_dim_(spec.rotary_dim > 0 ? spec.rotary_dim : head_dim), interleaved_(spec.interleaved) {
  if (rotary_dim_ > head_dim_ || rotary_dim_ % 2 != 0)
    throw Error("rope: rotary dimension " + std::to_string(rotary_dim_) + " does not fit heads of " + std::to_string(head_dim_));
  const int64_t half = rotary_dim_ / 2;
  inv_freq_.resize(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    inv_freq_[static_cast<size_t>(i)] = std::pow(spec.theta, -2.0 * static_cast<double>(i) / static_cast<double>(rotary_dim_));

  const RopeScaling& rs = spec.scaling;
  if (rs.kind == RopeScaling::Kind::Linear)
    for (double& f : inv_freq_) f /= rs.factor;
  if (rs.kind == RopeScaling::Kind::Factors) {
    if (rs.factors.size() != inv_freq_.size())
      throw Error("rope frequency factors: " + std::to_string(rs.factors.size()) + " for " +
                  std::to_string(inv_freq_.size()) + " rotated pairs");
    for (size_t i = 0; i < inv_freq_.size(); ++i) inv_freq_[i] /= rs.factors[i];
  }
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
  if (rs.kind == RopeScaling::Kind::Yarn) {
    // YaRN: dimensions that turn fewer than beta_slow times over the original context are
    // interpolated (divided by `factor`), those turning more than beta_fast times are kept, with
    // a linear ramp between; cos and sin are scaled by the attention factor.
    const double d = static_cast<double>(rotary_dim_);
    auto correction_dim = [&](double rotations) {
      return d * std::log(static_cast<double>(rs.original_max_position) / (rotations * 2.0 * std::numbers::pi)) /
             (2.0 * std::log(spec.theta));
    };
    double low = correction_dim(rs.beta_fast), high = correction_dim(rs.beta_slow);
    if (rs.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, d - 1.0);
    if (low == high) high += 0.001;
    for (int64_t i = 0; i < half; ++i) {
      const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
      double& f = inv_freq_[static_cast<size_t>(i)];
      f = f / rs.factor * ramp + f * (1.0 - ramp);
    }
    scale_ = rs.attention_factor;
  }
  if (rs.kind == RopeScaling::Kind::Proportional) {
    // Only the first `rotated` pairs turn; a zero frequency leaves a pair exactly as it is.
    const auto rotated = static_cast<int64_t>(rs.partial_rotary_factor * static_cast<double>(head_dim_)) / 2;
    for (int64_t i = 0; i < half; ++i) {
      double& f = inv_freq_[static_cast<size_t>(i)];
      f = i < rotated ? f / rs.factor : 0.0;
    }
  }
}

void Rope::apply(float* x, int64_t n_heads, int64_t pos) const {
  const int64_t half = rotary_dim_ / 2;
  thread_local std::vector<float> cos_t, sin_t;
  cos_t.resize(static_cast<size_t>(half));
  sin_t.resize(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const double angle = static_cast<double>(pos) * inv_freq_[static_cast<size_t>(i)];
    cos_t[static_cast<size_t>(i)] = static_cast<float>(scale_ * std::cos(angle));
    sin_t[static_cast<size_t>(i)] = static_cast<float>(scale_ * std::sin(angle));
  }
  // Pair i is (i, i + half), or (2i, 2i + 1) interleaved.
  const int64_t step = interleaved_ ? 2 : 1, other = interleaved_ ? 1 : half;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim_;
    for (int64_t i = 0; i < half; ++i) {
      float& a = v[i * step];
      float& b = v[i * step + other];
      const float c = cos_t[static_cast<size_t>(i)], s = sin_t[static_cast<size_t>(i)];
      const float a0 = a, b0 = b;
      a = a0 * c - b0 * s;
      b = b0 * c + a0 * s;
    }
  }
}

}  // namespace keel::ops
