#include "keel/arch/transformer.h"

#include "keel/ops/matmul.h"
#include "keel/util/error.h"

namespace keel {

Transformer::Transformer(const ModelWeights& weights, ThreadPool& pool)
    : w_(weights), pool_(pool), rope_(weights.spec), scores_(static_cast<size_t>(pool.size())) {}

void Transformer::forward(std::span<const int32_t> tokens, KvCache& cache, std::span<const int64_t> logit_rows,
                          float* logits) {
  const ModelSpec& s = w_.spec;
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t pos0 = cache.size();
  if (n == 0) return;
  if (pos0 + n > cache.capacity())
    throw Error("context full: " + std::to_string(pos0 + n) + " tokens exceed the context size of " +
                std::to_string(cache.capacity()));
  for (int32_t t : tokens)
    if (t < 0 || t >= s.vocab_size)
      throw Error("token id " + std::to_string(t) + " is outside the vocabulary (0.." + std::to_string(s.vocab_size - 1) + ")");

  const int64_t d = s.hidden_size;
  x_.resize(static_cast<size_t>(n * d));
  h_.resize(static_cast<size_t>(n * d));
  for (int64_t t = 0; t < n; ++t) ops::decode_row(w_.embed, tokens[static_cast<size_t>(t)], x_.data() + t * d);

  for (int64_t layer = 0; layer < s.num_layers; ++layer) {
    const LayerWeights& l = w_.layers[static_cast<size_t>(layer)];
    attention_block(l, layer, n, pos0, cache);
    mlp_block(l, n);
  }
  cache.set_size(pos0 + n);

  if (logit_rows.empty()) return;
  const int64_t m = static_cast<int64_t>(logit_rows.size());
  std::vector<float> last(static_cast<size_t>(m * d));
  for (int64_t i = 0; i < m; ++i) {
    const int64_t row = logit_rows[static_cast<size_t>(i)];
    if (row < 0 || row >= n) throw Error("logit row out of range");
    ops::rms_norm(x_.data() + row * d, w_.final_norm.data(), d, s.rms_norm_eps, last.data() + i * d);
  }
  ops::matmul(w_.output(), last.data(), m, logits, pool_);
}

void Transformer::attention_block(const LayerWeights& l, int64_t layer, int64_t n, int64_t pos0, KvCache& cache) {
  const ModelSpec& s = w_.spec;
  const int64_t d = s.hidden_size, qd = s.q_dim(), kvd = s.kv_dim(), hd = s.head_dim;
  for (int64_t t = 0; t < n; ++t)
    ops::rms_norm(x_.data() + t * d, l.attn_norm.data(), d, s.rms_norm_eps, h_.data() + t * d);

  q_.resize(static_cast<size_t>(n * qd));
  k_.resize(static_cast<size_t>(n * kvd));
  v_.resize(static_cast<size_t>(n * kvd));
  ops::matmul(l.wq, h_.data(), n, q_.data(), pool_);
  ops::matmul(l.wk, h_.data(), n, k_.data(), pool_);
  ops::matmul(l.wv, h_.data(), n, v_.data(), pool_);

  for (int64_t t = 0; t < n; ++t) {
    float* q = q_.data() + t * qd;
    float* k = k_.data() + t * kvd;
    float* v = v_.data() + t * kvd;
    if (!l.bq.empty()) ops::add_inplace(q, l.bq.data(), qd);
    if (!l.bk.empty()) ops::add_inplace(k, l.bk.data(), kvd);
    if (!l.bv.empty()) ops::add_inplace(v, l.bv.data(), kvd);
    if (!l.q_norm.empty()) {
      for (int64_t h = 0; h < s.num_heads; ++h) ops::rms_norm(q + h * hd, l.q_norm.data(), hd, s.rms_norm_eps, q + h * hd);
      for (int64_t h = 0; h < s.num_kv_heads; ++h) ops::rms_norm(k + h * hd, l.k_norm.data(), hd, s.rms_norm_eps, k + h * hd);
    }
    rope_.apply(q, s.num_heads, pos0 + t);
    rope_.apply(k, s.num_kv_heads, pos0 + t);
    cache.store(layer, pos0 + t, k, v);
  }

  // Each (token, head) pair attends over the positions up to and including its own.
  attn_.resize(static_cast<size_t>(n * qd));
  pool_.parallel_for(static_cast<size_t>(n * s.num_heads), [&](size_t task, int thread) {
    const int64_t t = static_cast<int64_t>(task) / s.num_heads;
    const int64_t h = static_cast<int64_t>(task) % s.num_heads;
    auto& scratch = scores_[static_cast<size_t>(thread)];
    if (scratch.size() < static_cast<size_t>(pos0 + t + 1)) scratch.resize(static_cast<size_t>(cache.capacity()));
    cache.attend(layer, h, q_.data() + t * qd + h * hd, pos0 + t + 1, scratch.data(), attn_.data() + t * qd + h * hd);
  });

  ops::matmul(l.wo, attn_.data(), n, h_.data(), pool_);
  ops::add_inplace(x_.data(), h_.data(), n * d);
}

void Transformer::mlp_block(const LayerWeights& l, int64_t n) {
  const ModelSpec& s = w_.spec;
  const int64_t d = s.hidden_size, ff = s.intermediate_size;
  for (int64_t t = 0; t < n; ++t)
    ops::rms_norm(x_.data() + t * d, l.mlp_norm.data(), d, s.rms_norm_eps, h_.data() + t * d);
  gate_.resize(static_cast<size_t>(n * ff));
  up_.resize(static_cast<size_t>(n * ff));
  ops::matmul(l.gate, h_.data(), n, gate_.data(), pool_);
  ops::matmul(l.up, h_.data(), n, up_.data(), pool_);
  ops::silu_mul(gate_.data(), up_.data(), n * ff, gate_.data());
  ops::matmul(l.down, gate_.data(), n, h_.data(), pool_);
  ops::add_inplace(x_.data(), h_.data(), n * d);
}

}  // namespace keel
