#pragma once
// Gated DeltaNet, the linear attention of Qwen3-Next's recurrent layers: a short causal
// convolution over [q | k | v] and, per value head, the gated delta rule over a (key_dim, value_dim)
// state S:
//   S_t = exp(g_t) S_{t-1} + k_t d_t^T,  d_t = beta_t (v_t - exp(g_t) S_{t-1}^T k_t),  o_t = S_t^T q_t.
//
// Computed in tiles of kDeltaTile positions that start at multiples of kDeltaTile (the chunked form
// of the rule): a token's output comes from the state at its tile's start and the tile's earlier
// tokens (forward substitution for the corrected values d), and the state itself moves only when a
// tile is complete. Every token's arithmetic is one fixed sequence of operations over (the state
// at its tile's start, the tile's tokens up to it), whatever the number of tokens a call runs: a
// prompt run in one pass, in chunks or token by token gives the same bits, and so does a run that
// resumes from a state saved at a tile boundary (a snapshot). kKvBlockTokens is a multiple of the
// tile, so every KV block boundary is a tile boundary.
//
// Thread-safety: a LinearLayerState belongs to one sequence and is advanced by the thread running
// its forward pass; delta_rule_head() may run concurrently for different heads of one state.
#include <cstdint>
#include <vector>

namespace keel::ops {

inline constexpr int64_t kDeltaTile = 16;

struct LinearAttentionShape {
  int64_t key_heads = 0, value_heads = 0, key_dim = 0, value_dim = 0, conv_kernel = 0;

  int64_t conv_channels() const { return 2 * key_heads * key_dim + value_heads * value_dim; }  // [q | k | v]
  // One head's live floats: S (key_dim, value_dim), then the tile's keys (kDeltaTile, key_dim),
  // corrected values (kDeltaTile, value_dim) and cumulative log decays (kDeltaTile).
  int64_t head_floats() const { return key_dim * value_dim + kDeltaTile * (key_dim + value_dim + 1); }
  // A snapshot at a tile boundary: the last conv_kernel - 1 conv inputs (conv_kernel - 1, channels),
  // then each value head's S.
  int64_t snapshot_floats() const { return (conv_kernel - 1) * conv_channels() + value_heads * key_dim * value_dim; }
  // A LinearLayerState: the conv window over a whole tile, and every head's live floats.
  int64_t live_floats() const { return (conv_kernel - 1 + kDeltaTile) * conv_channels() + value_heads * head_floats(); }
};

// One sequence's state in one linear-attention layer, f32 throughout: the recurrence accumulates
// over the whole sequence, and rounding S to bf16 at every tile would drift from the reference.
class LinearLayerState {
 public:
  explicit LinearLayerState(const LinearAttentionShape& shape);

  const LinearAttentionShape& shape() const { return shape_; }
  int64_t position() const { return pos_; }                   // tokens this layer has run
  int64_t tile_start() const { return pos_ - pos_ % kDeltaTile; }
  int64_t filled() const { return pos_ % kDeltaTile; }       // tokens of the current tile run

  // The conv inputs at positions [tile_start() - (conv_kernel - 1), tile_start() + kDeltaTile):
  // (conv_kernel - 1 + kDeltaTile, channels), zeros before position 0.
  float* conv() { return conv_.data(); }
  float* head(int64_t h) { return heads_.data() + h * shape_.head_floats(); }

  // The state at position 0.
  void reset();
  // Forgets the tokens from `n` on; n must be inside the current tile ([tile_start(), position()]).
  void rewind(int64_t n);
  // At a tile boundary: writes snapshot_floats() floats (conv inputs, then every head's S).
  void save(float* out) const;
  // The state saved by save() at tile boundary `pos`.
  void restore(const float* in, int64_t pos);

  // Marks `n` more tokens run (after the conv and every head ran them), and at a tile boundary moves
  // the conv window on.
  void advance(int64_t n);

 private:
  LinearAttentionShape shape_;
  std::vector<float> conv_;
  std::vector<float> heads_;  // (value_heads, head_floats)
  int64_t pos_ = 0;
};

// out (n, channels) = silu(causal depthwise conv) of the inputs in (n, channels) at the state's
// next n positions, which stay inside its current tile; the inputs are recorded in state.conv().
// weight (channels, conv_kernel) as the checkpoint stores it (oldest tap first).
void causal_conv_silu(LinearLayerState& state, const float* weight, const float* in, int64_t n, float* out);

// One value head over n tokens that stay inside the state's current tile (filled + n <= kDeltaTile,
// where `filled` is state.filled() before the call). q and k are L2-normalised (q also scaled by
// 1/sqrt(key_dim)), g <= 0 the log decay, beta in (0, 1); each token's q and k rows are
// key_dim floats `qk_stride` apart, its v rows value_dim floats `v_stride` apart, its g and beta
// `gb_stride` apart, its out rows `out_stride` apart. When the tile completes, S becomes the state at
// its end (LinearLayerState::advance() then moves the conv window and save() can snapshot it).
void delta_rule_head(LinearLayerState& state, int64_t head, int64_t filled, int64_t n, const float* q, const float* k,
                     int64_t qk_stride, const float* v, int64_t v_stride, const float* g, const float* beta,
                     int64_t gb_stride, float* out, int64_t out_stride);

// x (n) / sqrt(sum x^2 + 1e-6): the L2 norm of the reference kernel, in place.
void l2_normalize(float* x, int64_t n);

}  // namespace keel::ops
