#include "keel/arch/linear_attention.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "keel/ops/matmul.h"
#include "keel/util/error.h"

namespace keel::arch {
namespace {

// A run of one sequence's tokens inside one tile: rows [row, row + len) of the pass.
struct Piece {
  KvCache* cache;
  ops::LinearLayerState* state;
  int64_t row, len;
};

}  // namespace

void linear_attention_block(const ModelSpec& s, const LayerSpec& ls, const LayerWeights& lw, int64_t layer, int64_t n,
                            ThreadPool& pool, Workspace& ws) {
  const LinearAttentionDims& a = *ls.linear;
  const LinearAttentionWeights& w = lw.linear;
  const int64_t hk = a.key_heads, hv = a.value_heads, dk = a.key_head_dim, dv = a.value_head_dim, group = hv / hk;
  const int64_t keys = hk * dk, values = hv * dv, channels = 2 * keys + values, d = s.hidden_size;
  auto& lin = ws.linear;
  norm_rows(s, lw.attn_norm, ws.x.data(), n, ws.h.data());
  lin.qkvz.resize(static_cast<size_t>(n * (channels + values)));
  lin.ba.resize(static_cast<size_t>(n * 2 * hv));
  const ops::MatmulJob inputs[] = {{&w.in_qkvz, ws.h.data(), n, lin.qkvz.data()}, {&w.in_ba, ws.h.data(), n, lin.ba.data()}};
  ops::matmul_batch(inputs, pool);

  // Per key head [q | k | v | z] and [b | a] -> the conv's input [all q | all k | all v], z, g, beta.
  lin.mixed.resize(static_cast<size_t>(n * channels));
  lin.qkv.resize(static_cast<size_t>(n * channels));
  lin.z.resize(static_cast<size_t>(n * values));
  lin.g.resize(static_cast<size_t>(n * hv));
  lin.beta.resize(static_cast<size_t>(n * hv));
  for (int64_t t = 0; t < n; ++t) {
    float* mixed = lin.mixed.data() + t * channels;
    for (int64_t kh = 0; kh < hk; ++kh) {
      const float* src = lin.qkvz.data() + t * (channels + values) + kh * (2 * dk + 2 * group * dv);
      std::copy_n(src, dk, mixed + kh * dk);
      std::copy_n(src + dk, dk, mixed + keys + kh * dk);
      std::copy_n(src + 2 * dk, group * dv, mixed + 2 * keys + kh * group * dv);
      std::copy_n(src + 2 * dk + group * dv, group * dv, lin.z.data() + t * values + kh * group * dv);
      const float* ba = lin.ba.data() + t * 2 * hv + kh * 2 * group;
      for (int64_t j = 0; j < group; ++j) {
        const int64_t h = kh * group + j;
        lin.beta[static_cast<size_t>(t * hv + h)] = ops::sigmoid(ba[j]);
        lin.g[static_cast<size_t>(t * hv + h)] =
            w.decay[static_cast<size_t>(h)] * ops::softplus(ba[group + j] + w.dt_bias[static_cast<size_t>(h)]);
      }
    }
  }

  // Each sequence's tokens, cut at tile boundaries into pieces; round r runs every sequence's r-th
  // piece, its value heads in parallel.
  std::vector<std::vector<Piece>> pieces;  // per sequence
  for (int64_t t = 0; t < n;) {
    KvCache* cache = ws.rows[static_cast<size_t>(t)].cache;
    ops::LinearLayerState& state = cache->linear_state(layer);
    if (state.position() != ws.rows[static_cast<size_t>(t)].pos)
      throw InternalError("linear attention layer " + std::to_string(layer) + " holds " + std::to_string(state.position()) +
                          " tokens but the pass runs from " + std::to_string(ws.rows[static_cast<size_t>(t)].pos));
    auto& mine = pieces.emplace_back();
    int64_t pos = state.position();
    while (t < n && ws.rows[static_cast<size_t>(t)].cache == cache) {
      int64_t len = 1;
      while (t + len < n && ws.rows[static_cast<size_t>(t + len)].cache == cache && (pos + len) % ops::kDeltaTile != 0) ++len;
      mine.push_back({cache, &state, t, len});
      t += len;
      pos += len;
    }
  }
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  lin.core.resize(static_cast<size_t>(n * values));
  std::vector<Piece> round;
  for (size_t r = 0;; ++r) {
    round.clear();
    for (const auto& mine : pieces)
      if (r < mine.size()) round.push_back(mine[r]);
    if (round.empty()) break;
    for (const Piece& p : round) {
      ops::causal_conv_silu(*p.state, w.conv.data(), lin.mixed.data() + p.row * channels, p.len, lin.qkv.data() + p.row * channels);
      for (int64_t t = p.row; t < p.row + p.len; ++t) {
        float* row = lin.qkv.data() + t * channels;
        for (int64_t kh = 0; kh < hk; ++kh) {
          float* q = row + kh * dk;
          ops::l2_normalize(q, dk);
          for (int64_t i = 0; i < dk; ++i) q[i] *= q_scale;
          ops::l2_normalize(row + keys + kh * dk, dk);
        }
      }
    }
    pool.parallel_for(round.size() * static_cast<size_t>(hv), [&](size_t task, int) {
      const Piece& p = round[task / static_cast<size_t>(hv)];
      const auto h = static_cast<int64_t>(task % static_cast<size_t>(hv));
      const float* row = lin.qkv.data() + p.row * channels;
      const int64_t kh = h / group;
      ops::delta_rule_head(*p.state, h, p.state->filled(), p.len, row + kh * dk, row + keys + kh * dk, channels,
                           row + 2 * keys + h * dv, channels, lin.g.data() + p.row * hv + h, lin.beta.data() + p.row * hv + h,
                           hv, lin.core.data() + p.row * values + h * dv, values);
    });
    for (const Piece& p : round) {
      p.state->advance(p.len);
      if (p.state->filled() != 0) continue;
      if (float* snapshot = p.cache->linear_snapshot(layer, p.state->position())) p.state->save(snapshot);
    }
  }

  // out_proj(rms_norm(core) * silu(z)), each value head normed alone with the plain weight.
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < hv; ++h) {
      float* core = lin.core.data() + t * values + h * dv;
      const float* z = lin.z.data() + t * values + h * dv;
      ops::rms_norm(core, w.norm.data(), dv, s.norm_eps, core, NormKind::Rms);
      for (int64_t i = 0; i < dv; ++i) core[i] *= z[i] * ops::sigmoid(z[i]);
    }
  ops::matmul(w.out, lin.core.data(), n, ws.h.data(), pool);
  ops::add_inplace(ws.x.data(), ws.h.data(), n * d);
}

}  // namespace keel::arch
