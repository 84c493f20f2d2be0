#include "keel/ops/gated_delta_rule.h"

#include <algorithm>
#include <cmath>

#include "keel/util/error.h"

namespace keel::ops {

LinearLayerState::LinearLayerState(const LinearAttentionShape& shape)
    : shape_(shape),
      conv_(static_cast<size_t>((shape.conv_kernel - 1 + kDeltaTile) * shape.conv_channels()), 0.0f),
      heads_(static_cast<size_t>(shape.value_heads * shape.head_floats()), 0.0f) {
  if (shape.conv_kernel < 1 || shape.key_dim <= 0 || shape.value_dim <= 0 || shape.key_heads <= 0 ||
      shape.value_heads <= 0 || shape.value_heads % shape.key_heads != 0)
    throw Error("linear attention: unusable shape (conv kernel " + std::to_string(shape.conv_kernel) + ", " +
                std::to_string(shape.key_heads) + " key heads, " + std::to_string(shape.value_heads) + " value heads)");
}

void LinearLayerState::reset() {
  std::fill(conv_.begin(), conv_.end(), 0.0f);
  std::fill(heads_.begin(), heads_.end(), 0.0f);
  pos_ = 0;
}

void LinearLayerState::rewind(int64_t n) {
  if (n < tile_start() || n > pos_)
    throw InternalError("linear attention state rewound to " + std::to_string(n) + " outside its tile (" +
                        std::to_string(tile_start()) + ".." + std::to_string(pos_) + ")");
  pos_ = n;  // the tile's rows past n are never read before they are written again
}

void LinearLayerState::save(float* out) const {
  if (filled() != 0) throw InternalError("linear attention state saved inside a tile");
  const int64_t conv = (shape_.conv_kernel - 1) * shape_.conv_channels(), s = shape_.key_dim * shape_.value_dim;
  std::copy_n(conv_.data(), conv, out);
  for (int64_t h = 0; h < shape_.value_heads; ++h)
    std::copy_n(heads_.data() + h * shape_.head_floats(), s, out + conv + h * s);
}

void LinearLayerState::restore(const float* in, int64_t pos) {
  if (pos % kDeltaTile != 0) throw InternalError("linear attention state restored inside a tile");
  const int64_t conv = (shape_.conv_kernel - 1) * shape_.conv_channels(), s = shape_.key_dim * shape_.value_dim;
  std::copy_n(in, conv, conv_.data());
  for (int64_t h = 0; h < shape_.value_heads; ++h)
    std::copy_n(in + conv + h * s, s, heads_.data() + h * shape_.head_floats());
  pos_ = pos;
}

void LinearLayerState::advance(int64_t n) {
  if (n < 0 || filled() + n > kDeltaTile) throw InternalError("linear attention advanced across a tile boundary");
  pos_ += n;
  if (filled() != 0 || n == 0) return;
  // The tile is complete: its last conv_kernel - 1 inputs open the next one's window.
  const int64_t c = shape_.conv_channels(), keep = shape_.conv_kernel - 1;
  std::copy_n(conv_.data() + kDeltaTile * c, keep * c, conv_.data());
}

void causal_conv_silu(LinearLayerState& state, const float* weight, const float* in, int64_t n, float* out) {
  const int64_t c = state.shape().conv_channels(), taps = state.shape().conv_kernel, filled = state.filled();
  if (filled + n > kDeltaTile) throw InternalError("linear attention conv across a tile boundary");
  float* window = state.conv();  // (taps - 1 + kDeltaTile, c)
  for (int64_t t = 0; t < n; ++t) {
    const int64_t row = taps - 1 + filled + t;  // this token's input row
    std::copy_n(in + t * c, c, window + row * c);
    float* o = out + t * c;
    for (int64_t ch = 0; ch < c; ++ch) {
      float sum = 0.0f;
      for (int64_t i = 0; i < taps; ++i) sum += weight[ch * taps + i] * window[(row - (taps - 1) + i) * c + ch];
      o[ch] = sum / (1.0f + std::exp(-sum));
    }
  }
}

void delta_rule_head(LinearLayerState& state, int64_t head, int64_t filled, int64_t n, const float* q, const float* k,
                     int64_t qk_stride, const float* v, int64_t v_stride, const float* g, const float* beta,
                     int64_t gb_stride, float* out, int64_t out_stride) {
  const int64_t dk = state.shape().key_dim, dv = state.shape().value_dim;
  if (filled != state.filled() || filled + n > kDeltaTile) throw InternalError("linear attention tile overrun");
  float* s = state.head(head);            // (dk, dv) at the tile's start
  float* keys = s + dk * dv;              // (kDeltaTile, dk)
  float* deltas = keys + kDeltaTile * dk;  // (kDeltaTile, dv)
  float* decay = deltas + kDeltaTile * dv;  // (kDeltaTile) cumulative log decay through each token
  thread_local std::vector<float> ks, qs;
  ks.resize(static_cast<size_t>(dv));
  qs.resize(static_cast<size_t>(dv));

  for (int64_t t = 0; t < n; ++t) {
    const int64_t j = filled + t;
    const float* kj = k + t * qk_stride;
    const float* qj = q + t * qk_stride;
    const float* vj = v + t * v_stride;
    const float b = beta[t * gb_stride];
    decay[j] = j == 0 ? g[t * gb_stride] : decay[j - 1] + g[t * gb_stride];
    std::copy_n(kj, dk, keys + j * dk);
    // S0^T k_j and S0^T q_j, summed over the key dimension in order.
    std::fill(ks.begin(), ks.end(), 0.0f);
    std::fill(qs.begin(), qs.end(), 0.0f);
    for (int64_t a = 0; a < dk; ++a) {
      const float* row = s + a * dv;
      const float ka = kj[a], qa = qj[a];
      for (int64_t i = 0; i < dv; ++i) {
        ks[static_cast<size_t>(i)] += ka * row[i];
        qs[static_cast<size_t>(i)] += qa * row[i];
      }
    }
    // d_j = beta (v_j - e^{G_j} S0^T k_j - sum_{m<j} e^{G_j - G_m} (k_j . k_m) d_m)
    const float to_start = std::exp(decay[j]);
    float* dj = deltas + j * dv;
    for (int64_t i = 0; i < dv; ++i) dj[i] = vj[i] - to_start * ks[static_cast<size_t>(i)];
    for (int64_t m = 0; m < j; ++m) {
      float dot = 0.0f;
      for (int64_t a = 0; a < dk; ++a) dot += kj[a] * keys[m * dk + a];
      const float c = std::exp(decay[j] - decay[m]) * dot;
      const float* dm = deltas + m * dv;
      for (int64_t i = 0; i < dv; ++i) dj[i] -= c * dm[i];
    }
    for (int64_t i = 0; i < dv; ++i) dj[i] *= b;
    // o_j = e^{G_j} S0^T q_j + sum_{m<=j} e^{G_j - G_m} (q_j . k_m) d_m
    float* o = out + t * out_stride;
    for (int64_t i = 0; i < dv; ++i) o[i] = to_start * qs[static_cast<size_t>(i)];
    for (int64_t m = 0; m <= j; ++m) {
      float dot = 0.0f;
      for (int64_t a = 0; a < dk; ++a) dot += qj[a] * keys[m * dk + a];
      const float c = std::exp(decay[j] - decay[m]) * dot;
      const float* dm = deltas + m * dv;
      for (int64_t i = 0; i < dv; ++i) o[i] += c * dm[i];
    }
  }
  if (filled + n < kDeltaTile) return;
  // The tile is complete: S = e^{G_last} S0 + sum_m e^{G_last - G_m} k_m d_m^T.
  const int64_t last = kDeltaTile - 1;
  float weights[kDeltaTile];
  for (int64_t m = 0; m < kDeltaTile; ++m) weights[m] = std::exp(decay[last] - decay[m]);
  const float to_end = std::exp(decay[last]);
  for (int64_t a = 0; a < dk; ++a) {
    float* row = s + a * dv;
    for (int64_t i = 0; i < dv; ++i) row[i] *= to_end;
    for (int64_t m = 0; m < kDeltaTile; ++m) {
      const float c = weights[m] * keys[m * dk + a];
      const float* dm = deltas + m * dv;
      for (int64_t i = 0; i < dv; ++i) row[i] += c * dm[i];
    }
  }
}

void l2_normalize(float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(sum + 1e-6f);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace keel::ops
