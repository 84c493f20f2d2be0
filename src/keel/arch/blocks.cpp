#include "keel/arch/blocks.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "keel/ops/attention_params.h"
#include "keel/ops/matmul.h"

namespace keel::arch {
namespace {

void resize(std::vector<float>& v, int64_t n) { v.resize(static_cast<size_t>(n)); }

// Queries per attention task: enough that widening a K/V tile is shared widely, few enough that a
// prefill chunk still makes a task per thread.
constexpr int64_t kQueriesPerTask = 64;

// h (n, dim) -> h normed by `weight` (sandwich post-norm), when the layer has one.
void post_norm(const ModelSpec& s, const std::vector<float>& weight, int64_t n, Workspace& ws) {
  if (!weight.empty()) norm_rows(s, weight, ws.h.data(), n, ws.h.data());
}

// h (n, dim) -> h: the dense gated FFN of the layer, in place.
void dense_ffn(const LayerSpec& ls, const LayerWeights& w, int64_t n, ThreadPool& pool, Workspace& ws) {
  const int64_t ff = ls.ffn_dim;
  resize(ws.gate, n * ff);
  resize(ws.up, n * ff);
  ops::matmul(w.gate, ws.h.data(), n, ws.gate.data(), pool);
  ops::matmul(w.up, ws.h.data(), n, ws.up.data(), pool);
  ops::gated_activation(ls.activation, ws.gate.data(), ws.up.data(), n * ff, ws.gate.data());
  ops::matmul(w.down, ws.gate.data(), n, ws.h.data(), pool);
}

}  // namespace

void norm_rows(const ModelSpec& s, const std::vector<float>& weight, const float* in, int64_t n, float* out) {
  const int64_t d = s.hidden_size;
  for (int64_t t = 0; t < n; ++t) ops::rms_norm(in + t * d, weight.data(), d, s.norm_eps, out + t * d, s.norm);
}

void attention_block(const ModelSpec& s, const LayerSpec& ls, const LayerWeights& w, int64_t layer,
                     const ops::Rope& rope, int64_t n, ThreadPool& pool, Workspace& ws) {
  const int64_t d = s.hidden_size, qd = ls.q_dim(), kvd = ls.kv_dim(), hd = ls.head_dim;
  norm_rows(s, w.attn_norm, ws.x.data(), n, ws.h.data());

  resize(ws.q, n * qd);
  resize(ws.k, n * kvd);
  resize(ws.v, n * kvd);
  if (ls.gated_attention) {
    // (n, heads, [query | gate]) -> q (n, heads, head_dim) and the gate beside it.
    resize(ws.attn_gate, n * 2 * qd);
    ops::matmul(w.wq, ws.h.data(), n, ws.attn_gate.data(), pool);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t h = 0; h < ls.num_heads; ++h) {
        const float* both = ws.attn_gate.data() + t * 2 * qd + h * 2 * hd;
        std::copy_n(both, hd, ws.q.data() + t * qd + h * hd);
        std::copy_n(both + hd, hd, ws.attn_gate.data() + t * qd + h * hd);  // never ahead of what it reads
      }
  } else {
    ops::matmul(w.wq, ws.h.data(), n, ws.q.data(), pool);
  }
  ops::matmul(w.wk, ws.h.data(), n, ws.k.data(), pool);
  if (ls.values_are_keys)
    std::copy_n(ws.k.data(), n * kvd, ws.v.data());  // before k's norm and rope
  else
    ops::matmul(w.wv, ws.h.data(), n, ws.v.data(), pool);

  for (int64_t t = 0; t < n; ++t) {
    float* q = ws.q.data() + t * qd;  // (heads, head_dim)
    float* k = ws.k.data() + t * kvd;  // (kv_heads, head_dim)
    float* v = ws.v.data() + t * kvd;
    if (!w.bq.empty()) ops::add_inplace(q, w.bq.data(), qd);
    if (!w.bk.empty()) ops::add_inplace(k, w.bk.data(), kvd);
    if (!w.bv.empty()) ops::add_inplace(v, w.bv.data(), kvd);
    if (ls.qk_norm) {
      for (int64_t h = 0; h < ls.num_heads; ++h) ops::rms_norm(q + h * hd, w.q_norm.data(), hd, s.norm_eps, q + h * hd, s.norm);
      for (int64_t h = 0; h < ls.num_kv_heads; ++h)
        ops::rms_norm(k + h * hd, w.k_norm.data(), hd, s.norm_eps, k + h * hd, s.norm);
    }
    if (ls.v_norm)
      for (int64_t h = 0; h < ls.num_kv_heads; ++h) ops::rms_norm(v + h * hd, nullptr, hd, s.norm_eps, v + h * hd);
    const RowPlace& place = ws.rows[static_cast<size_t>(t)];
    rope.apply(q, ls.num_heads, place.pos);
    rope.apply(k, ls.num_kv_heads, place.pos);
    place.cache->store(layer, place.pos, k, v);
  }

  const ops::AttentionParams params{.scale = static_cast<float>(ls.attention_scale),
                                    .window = ls.attention == AttentionKind::Sliding ? ls.window : 0,
                                    .softcap = static_cast<float>(ls.attention_softcap)};
  // A task is a block of one sequence's rows times one KV head (or a slice of its query heads, when
  // there are fewer tasks than threads): its queries read each K/V tile once.
  const int64_t group = ls.num_heads / ls.num_kv_heads;
  const int64_t rows_per_task = std::max<int64_t>(1, kQueriesPerTask / group);
  ws.attention_rows.clear();
  for (int64_t t = 0; t < n;) {
    int64_t end = t + 1;
    while (end < n && end - t < rows_per_task && ws.rows[static_cast<size_t>(end)].cache == ws.rows[static_cast<size_t>(t)].cache)
      ++end;
    ws.attention_rows.emplace_back(t, end);
    t = end;
  }
  const auto blocks = static_cast<int64_t>(ws.attention_rows.size());
  const int64_t slices = std::clamp<int64_t>((pool.size() + blocks * ls.num_kv_heads - 1) / (blocks * ls.num_kv_heads), 1, group);
  const int64_t heads_per_slice = (group + slices - 1) / slices;
  resize(ws.attn, n * qd);
  pool.parallel_for(static_cast<size_t>(blocks * ls.num_kv_heads * slices), [&](size_t task, int) {
    const auto slice = static_cast<int64_t>(task) % slices;
    const int64_t kv_head = static_cast<int64_t>(task) / slices % ls.num_kv_heads;
    const auto [t0, t1] = ws.attention_rows[task / static_cast<size_t>(slices * ls.num_kv_heads)];
    const int64_t h0 = kv_head * group + slice * heads_per_slice, h1 = std::min(h0 + heads_per_slice, (kv_head + 1) * group);
    thread_local std::vector<ops::AttentionQuery> queries;
    queries.clear();
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t h = h0; h < h1; ++h)
        queries.push_back({.q = ws.q.data() + t * qd + h * hd,
                           .pos = ws.rows[static_cast<size_t>(t)].pos,
                           .sink = ls.attention_sinks ? w.sinks[static_cast<size_t>(h)] : 0.0f,
                           .out = ws.attn.data() + t * qd + h * hd});
    ops::AttentionParams task_params = params;
    task_params.has_sink = ls.attention_sinks;
    if (!queries.empty()) ws.rows[static_cast<size_t>(t0)].cache->attend(layer, kv_head, queries, task_params);
  });

  if (ls.gated_attention)
    for (int64_t i = 0; i < n * qd; ++i) ws.attn[static_cast<size_t>(i)] *= ops::sigmoid(ws.attn_gate[static_cast<size_t>(i)]);
  ops::matmul(w.wo, ws.attn.data(), n, ws.h.data(), pool);
  if (!w.bo.empty())
    for (int64_t t = 0; t < n; ++t) ops::add_inplace(ws.h.data() + t * d, w.bo.data(), d);
  post_norm(s, w.post_attn_norm, n, ws);
  ops::add_inplace(ws.x.data(), ws.h.data(), n * d);
}

void gated_ffn_block(const ModelSpec& s, const LayerSpec& ls, const LayerWeights& w, int64_t n, ThreadPool& pool,
                     Workspace& ws) {
  norm_rows(s, w.ffn_norm, ws.x.data(), n, ws.h.data());
  dense_ffn(ls, w, n, pool, ws);
  post_norm(s, w.post_ffn_norm, n, ws);
  ops::add_inplace(ws.x.data(), ws.h.data(), n * s.hidden_size);
}

namespace {

// p[0..n) = softmax(p[0..n)), in f32 like the reference.
void softmax_inplace(float* p, int64_t n) {
  const float top = *std::max_element(p, p + n);
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += (p[i] = std::exp(p[i] - top));
  for (int64_t i = 0; i < n; ++i) p[i] /= sum;
}

// Chooses each token's experts from the router logits: the k largest (ties: the lower expert
// index), weighted by the softmax over all experts (optionally renormalized over the chosen) or,
// with softmax_after_topk, by the softmax over the chosen logits alone. Softmax keeps the order,
// so choosing before or after it picks the same experts.
void route(const MoeSpec& moe, int64_t n, Workspace& ws) {
  const int64_t e_count = moe.experts, k = moe.experts_per_token;
  ws.chosen.resize(static_cast<size_t>(n * k));
  ws.chosen_weight.resize(static_cast<size_t>(n * k));
  std::vector<int64_t> order(static_cast<size_t>(e_count));
  for (int64_t t = 0; t < n; ++t) {
    float* p = ws.router.data() + t * e_count;  // (experts)
    if (!moe.softmax_after_topk) softmax_inplace(p, e_count);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int64_t a, int64_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    int64_t* chosen = ws.chosen.data() + t * k;
    float* weight = ws.chosen_weight.data() + t * k;  // (k)
    for (int64_t j = 0; j < k; ++j) {
      chosen[j] = order[static_cast<size_t>(j)];
      weight[j] = p[chosen[j]];
    }
    if (moe.softmax_after_topk) {
      softmax_inplace(weight, k);
    } else if (moe.norm_topk_prob) {
      const float sum = std::accumulate(weight, weight + k, 0.0f);
      for (int64_t j = 0; j < k; ++j) weight[j] /= sum;
    }
  }
}

// rows (m, size) += bias (size) on every row.
void add_rows(float* rows, int64_t m, const std::vector<float>& bias) {
  const auto size = static_cast<int64_t>(bias.size());
  for (int64_t i = 0; i < m; ++i) ops::add_inplace(rows + i * size, bias.data(), size);
}

// expert_in (m, dim) -> expert_in (m, dim): one expert's FFN over the m tokens routed to it.
void run_expert(const LayerSpec& ls, const MoeSpec& moe, const ExpertWeights& x, int64_t m, ThreadPool& pool,
                Workspace& ws) {
  const int64_t ff = moe.expert_ffn_dim;
  if (x.gate_up.rows) {
    resize(ws.gate, m * 2 * ff);
    ops::matmul(x.gate_up, ws.expert_in.data(), m, ws.gate.data(), pool);  // (m, 2 ff) interleaved
    add_rows(ws.gate.data(), m, x.gate_up_bias);
    ops::clamped_swiglu(ws.gate.data(), m, ff, static_cast<float>(moe.swiglu_limit), ws.gate.data());
  } else if (moe.swiglu_limit > 0) {
    // gpt-oss with gate and up stored apart (GGUF): interleave their outputs as the fused rows
    // would have given them, then the same bias and clamped SwiGLU.
    resize(ws.gate, m * 2 * ff);
    resize(ws.up, m * ff);
    ops::matmul(x.gate, ws.expert_in.data(), m, ws.gate.data(), pool);
    ops::matmul(x.up, ws.expert_in.data(), m, ws.up.data(), pool);
    for (int64_t i = m * ff - 1; i >= 0; --i) {  // backwards: entry 2i is never below i
      ws.gate[static_cast<size_t>(2 * i)] = ws.gate[static_cast<size_t>(i)];
      ws.gate[static_cast<size_t>(2 * i + 1)] = ws.up[static_cast<size_t>(i)];
    }
    add_rows(ws.gate.data(), m, x.gate_up_bias);
    ops::clamped_swiglu(ws.gate.data(), m, ff, static_cast<float>(moe.swiglu_limit), ws.gate.data());
  } else {
    resize(ws.gate, m * ff);
    resize(ws.up, m * ff);
    ops::matmul(x.gate, ws.expert_in.data(), m, ws.gate.data(), pool);
    ops::matmul(x.up, ws.expert_in.data(), m, ws.up.data(), pool);
    ops::gated_activation(ls.activation, ws.gate.data(), ws.up.data(), m * ff, ws.gate.data());
  }
  ops::matmul(x.down, ws.gate.data(), m, ws.expert_in.data(), pool);  // (m, dim), reusing the input rows
  if (!x.down_bias.empty()) add_rows(ws.expert_in.data(), m, x.down_bias);
}

}  // namespace

namespace {

// ws.moe_out (n, dim) = the routed experts' weighted outputs for the expert inputs ws.h (n, dim),
// from the router logits in ws.router (n, experts). Each expert runs once over all its tokens.
void run_routed_experts(const ModelSpec& s, const LayerSpec& ls, const LayerWeights& w, int64_t n, ThreadPool& pool,
                        Workspace& ws) {
  const MoeSpec& moe = *ls.moe;
  const int64_t d = s.hidden_size, k = moe.experts_per_token;
  route(moe, n, ws);
  if (!w.expert_scale.empty())
    for (int64_t slot = 0; slot < n * k; ++slot)
      ws.chosen_weight[static_cast<size_t>(slot)] *= w.expert_scale[static_cast<size_t>(ws.chosen[static_cast<size_t>(slot)])];

  ws.moe_out.assign(static_cast<size_t>(n * d), 0.0f);
  for (int64_t e = 0; e < moe.experts; ++e) {
    // The tokens routed to expert e, and the weight of each; the expert then runs once for all.
    ws.expert_tokens.clear();
    std::vector<float> weights;
    for (int64_t slot = 0; slot < n * k; ++slot)
      if (ws.chosen[static_cast<size_t>(slot)] == e) {
        ws.expert_tokens.push_back(slot / k);
        weights.push_back(ws.chosen_weight[static_cast<size_t>(slot)]);
      }
    const auto m = static_cast<int64_t>(ws.expert_tokens.size());
    if (m == 0) continue;
    resize(ws.expert_in, m * d);
    for (int64_t i = 0; i < m; ++i)
      std::copy_n(ws.h.data() + ws.expert_tokens[static_cast<size_t>(i)] * d, d, ws.expert_in.data() + i * d);
    run_expert(ls, moe, w.experts[static_cast<size_t>(e)], m, pool, ws);
    for (int64_t i = 0; i < m; ++i) {
      float* out = ws.moe_out.data() + ws.expert_tokens[static_cast<size_t>(i)] * d;
      const float* y = ws.expert_in.data() + i * d;
      const float wt = weights[static_cast<size_t>(i)];
      for (int64_t j = 0; j < d; ++j) out[j] += wt * y[j];
    }
  }
}

// ws.moe_out (n, dim) += sigmoid(shared_expert_gate . h) * shared_expert(h) for the expert inputs
// ws.h (n, dim): Qwen's shared expert, which every token runs.
void add_shared_expert(const ModelSpec& s, const MoeSpec& moe, const LayerWeights& w, int64_t n, ThreadPool& pool,
                       Workspace& ws) {
  const int64_t d = s.hidden_size, ff = moe.shared_expert_ffn_dim;
  resize(ws.gate, n * ff);
  resize(ws.up, n * ff);
  resize(ws.dense, n * d);
  std::vector<float> gate(static_cast<size_t>(n));  // (n, 1)
  ops::matmul(w.shared_expert.gate, ws.h.data(), n, ws.gate.data(), pool);
  ops::matmul(w.shared_expert.up, ws.h.data(), n, ws.up.data(), pool);
  ops::gated_activation(Activation::Silu, ws.gate.data(), ws.up.data(), n * ff, ws.gate.data());
  ops::matmul(w.shared_expert.down, ws.gate.data(), n, ws.dense.data(), pool);
  ops::matmul(w.shared_expert_gate, ws.h.data(), n, gate.data(), pool);
  for (int64_t t = 0; t < n; ++t) {
    const float g = ops::sigmoid(gate[static_cast<size_t>(t)]);
    float* out = ws.moe_out.data() + t * d;
    const float* y = ws.dense.data() + t * d;
    for (int64_t j = 0; j < d; ++j) out[j] += g * y[j];
  }
}

// Gemma 4: x += post_norm(post_dense_norm(dense(pre_norm(x))) + post_moe_norm(experts(pre_moe_norm(x))))
// with the router reading x RMS-normed without weight, times router_scale and 1/sqrt(dim).
void dense_and_moe_ffn_block(const ModelSpec& s, const LayerSpec& ls, const LayerWeights& w, int64_t n,
                             ThreadPool& pool, Workspace& ws) {
  const int64_t d = s.hidden_size, e_count = ls.moe->experts;
  norm_rows(s, w.ffn_norm, ws.x.data(), n, ws.h.data());
  dense_ffn(ls, w, n, pool, ws);
  norm_rows(s, w.post_dense_norm, ws.h.data(), n, ws.h.data());
  resize(ws.dense, n * d);
  std::copy_n(ws.h.data(), n * d, ws.dense.data());

  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(d));
  for (int64_t t = 0; t < n; ++t) {
    float* row = ws.h.data() + t * d;  // (dim)
    ops::rms_norm(ws.x.data() + t * d, nullptr, d, s.norm_eps, row);
    for (int64_t i = 0; i < d; ++i) row[i] *= w.router_scale[static_cast<size_t>(i)] * inv_sqrt_d;
  }
  resize(ws.router, n * e_count);
  ops::matmul(w.router, ws.h.data(), n, ws.router.data(), pool);
  norm_rows(s, w.pre_moe_norm, ws.x.data(), n, ws.h.data());
  run_routed_experts(s, ls, w, n, pool, ws);
  norm_rows(s, w.post_moe_norm, ws.moe_out.data(), n, ws.moe_out.data());

  ops::add_inplace(ws.dense.data(), ws.moe_out.data(), n * d);
  norm_rows(s, w.post_ffn_norm, ws.dense.data(), n, ws.h.data());
  ops::add_inplace(ws.x.data(), ws.h.data(), n * d);
}

}  // namespace

void moe_ffn_block(const ModelSpec& s, const LayerSpec& ls, const LayerWeights& w, int64_t n, ThreadPool& pool,
                   Workspace& ws) {
  if (ls.moe->beside_dense) return dense_and_moe_ffn_block(s, ls, w, n, pool, ws);
  norm_rows(s, w.ffn_norm, ws.x.data(), n, ws.h.data());
  resize(ws.router, n * ls.moe->experts);
  ops::matmul(w.router, ws.h.data(), n, ws.router.data(), pool);
  if (!w.router_bias.empty()) add_rows(ws.router.data(), n, w.router_bias);
  run_routed_experts(s, ls, w, n, pool, ws);
  if (ls.moe->shared_expert_ffn_dim) add_shared_expert(s, *ls.moe, w, n, pool, ws);
  ops::add_inplace(ws.x.data(), ws.moe_out.data(), n * s.hidden_size);
}

}  // namespace keel::arch
