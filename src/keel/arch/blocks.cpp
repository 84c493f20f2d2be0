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
  const ops::MatmulJob gate_up[] = {{&w.gate, ws.h.data(), n, ws.gate.data()}, {&w.up, ws.h.data(), n, ws.up.data()}};
  ops::matmul_batch(gate_up, pool);
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
  // q (or gated attention's (n, heads, [query | gate])), k and v in one loop of the pool.
  if (ls.gated_attention) resize(ws.attn_gate, n * 2 * qd);
  std::vector<ops::MatmulJob> qkv = {{&w.wq, ws.h.data(), n, ls.gated_attention ? ws.attn_gate.data() : ws.q.data()},
                                     {&w.wk, ws.h.data(), n, ws.k.data()}};
  if (!ls.values_are_keys) qkv.push_back({&w.wv, ws.h.data(), n, ws.v.data()});
  ops::matmul_batch(qkv, pool);
  if (ls.gated_attention)  // -> q (n, heads, head_dim) and the gate beside it
    for (int64_t t = 0; t < n; ++t)
      for (int64_t h = 0; h < ls.num_heads; ++h) {
        const float* both = ws.attn_gate.data() + t * 2 * qd + h * 2 * hd;
        std::copy_n(both, hd, ws.q.data() + t * qd + h * hd);
        std::copy_n(both + hd, hd, ws.attn_gate.data() + t * qd + h * hd);  // never ahead of what it reads
      }
  if (ls.values_are_keys) std::copy_n(ws.k.data(), n * kvd, ws.v.data());  // before k's norm and rope

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

}  // namespace

namespace {

// The chosen experts of one layer's tokens, each run once over all its tokens: expert i of
// `runs` takes rows [first, first + m) of the per-slot buffers (the slots grouped by expert, in
// expert order), reading its input at x.
struct ExpertRun {
  const ExpertWeights* w;
  int64_t first, m;
  const float* x;  // (m, dim)
};

// Groups the routed slots by expert (expert order, then slot order) into ws.expert_tokens and
// ws.expert_weights, and lists the experts that run. An expert every token chose reads ws.h as it
// is (decode: every chosen expert, so the experts share one quantized input); the others' rows
// are gathered into ws.expert_in.
void group_slots_by_expert(const ModelSpec& s, const MoeSpec& moe, const LayerWeights& w, int64_t n, Workspace& ws,
                           std::vector<ExpertRun>& runs) {
  const int64_t d = s.hidden_size, slots = n * moe.experts_per_token;
  std::vector<int64_t> count(static_cast<size_t>(moe.experts) + 1, 0);
  for (int64_t slot = 0; slot < slots; ++slot) ++count[static_cast<size_t>(ws.chosen[static_cast<size_t>(slot)]) + 1];
  std::partial_sum(count.begin(), count.end(), count.begin());  // count[e]: expert e's first row
  ws.expert_tokens.resize(static_cast<size_t>(slots));
  ws.expert_weights.resize(static_cast<size_t>(slots));
  resize(ws.expert_in, slots * d);
  std::vector<int64_t> next(count.begin(), count.end() - 1);
  for (int64_t slot = 0; slot < slots; ++slot) {
    const auto e = static_cast<size_t>(ws.chosen[static_cast<size_t>(slot)]);
    const auto row = static_cast<size_t>(next[e]++);
    ws.expert_tokens[row] = slot / moe.experts_per_token;
    ws.expert_weights[row] = ws.chosen_weight[static_cast<size_t>(slot)];
  }
  runs.clear();
  for (int64_t e = 0; e < moe.experts; ++e) {
    const int64_t first = count[static_cast<size_t>(e)], m = count[static_cast<size_t>(e) + 1] - first;
    if (m == 0) continue;
    // A token chooses an expert at most once, so m == n means the tokens 0 .. n in order.
    const float* x = ws.h.data();
    if (m < n) {
      for (int64_t i = 0; i < m; ++i)
        std::copy_n(ws.h.data() + ws.expert_tokens[static_cast<size_t>(first + i)] * d, d,
                    ws.expert_in.data() + (first + i) * d);
      x = ws.expert_in.data() + first * d;
    }
    runs.push_back({&w.experts[static_cast<size_t>(e)], first, m, x});
  }
}

// ws.moe_out (n, dim) = the routed experts' weighted outputs for the expert inputs ws.h (n, dim),
// from the router logits in ws.router (n, experts). Each chosen expert runs once over all its
// tokens, and all of them together: one loop of the pool for every gate and up product, one for
// every down product. Per slot row: ws.gate (slots, 2 ff) with gate_up (gpt-oss), else (slots, ff)
// beside ws.up (slots, ff); the down products' outputs land in ws.expert_in (slots, dim).
void run_routed_experts(const ModelSpec& s, const LayerSpec& ls, const LayerWeights& w, int64_t n, ThreadPool& pool,
                        Workspace& ws) {
  const MoeSpec& moe = *ls.moe;
  const int64_t d = s.hidden_size, ff = moe.expert_ffn_dim, slots = n * moe.experts_per_token;
  route(moe, n, ws);
  if (!w.expert_scale.empty())
    for (int64_t slot = 0; slot < slots; ++slot)
      ws.chosen_weight[static_cast<size_t>(slot)] *= w.expert_scale[static_cast<size_t>(ws.chosen[static_cast<size_t>(slot)])];
  std::vector<ExpertRun> runs;
  group_slots_by_expert(s, moe, w, n, ws, runs);

  // gpt-oss interleaves gate and up (fused rows, or stored apart in GGUF) for a clamped SwiGLU.
  const bool interleaved = moe.swiglu_limit > 0;
  const int64_t gate_cols = interleaved ? 2 * ff : ff;
  resize(ws.gate, slots * gate_cols);
  resize(ws.up, slots * ff);
  std::vector<ops::MatmulJob> jobs;
  for (const ExpertRun& r : runs) {
    float* gate = ws.gate.data() + r.first * gate_cols;
    if (r.w->gate_up.rows) {
      jobs.push_back({&r.w->gate_up, r.x, r.m, gate});  // (m, 2 ff) interleaved
    } else {
      jobs.push_back({&r.w->gate, r.x, r.m, gate});  // (m, ff)
      jobs.push_back({&r.w->up, r.x, r.m, ws.up.data() + r.first * ff});
    }
  }
  ops::matmul_batch(jobs, pool);

  if (interleaved) {
    for (const ExpertRun& r : runs) {
      float* gate = ws.gate.data() + r.first * gate_cols;  // (m, 2 ff), then (m, ff)
      if (!r.w->gate_up.rows) {
        // Stored apart: interleave the outputs as the fused rows would have given them.
        const float* up = ws.up.data() + r.first * ff;
        for (int64_t i = r.m * ff - 1; i >= 0; --i) {  // backwards: entry 2i is never below i
          gate[2 * i] = gate[i];
          gate[2 * i + 1] = up[i];
        }
      }
      add_rows(gate, r.m, r.w->gate_up_bias);
      ops::clamped_swiglu(gate, r.m, ff, static_cast<float>(moe.swiglu_limit), gate);
    }
  } else {
    ops::gated_activation(ls.activation, ws.gate.data(), ws.up.data(), slots * ff, ws.gate.data());
  }

  jobs.clear();
  for (const ExpertRun& r : runs)
    jobs.push_back({&r.w->down, ws.gate.data() + r.first * gate_cols, r.m, ws.expert_in.data() + r.first * d});
  ops::matmul_batch(jobs, pool);

  // Each token's experts' outputs, weighted, added in expert order.
  ws.moe_out.assign(static_cast<size_t>(n * d), 0.0f);
  for (const ExpertRun& r : runs) {
    if (!r.w->down_bias.empty()) add_rows(ws.expert_in.data() + r.first * d, r.m, r.w->down_bias);
    for (int64_t row = r.first; row < r.first + r.m; ++row) {
      float* out = ws.moe_out.data() + ws.expert_tokens[static_cast<size_t>(row)] * d;
      const float* y = ws.expert_in.data() + row * d;
      const float wt = ws.expert_weights[static_cast<size_t>(row)];
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
  const ops::MatmulJob inputs[] = {{&w.shared_expert.gate, ws.h.data(), n, ws.gate.data()},
                                   {&w.shared_expert.up, ws.h.data(), n, ws.up.data()},
                                   {&w.shared_expert_gate, ws.h.data(), n, gate.data()}};
  ops::matmul_batch(inputs, pool);
  ops::gated_activation(Activation::Silu, ws.gate.data(), ws.up.data(), n * ff, ws.gate.data());
  ops::matmul(w.shared_expert.down, ws.gate.data(), n, ws.dense.data(), pool);
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
