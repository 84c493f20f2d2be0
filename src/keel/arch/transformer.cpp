#include "keel/arch/transformer.h"

#include "keel/ops/matmul.h"
#include "keel/util/error.h"

namespace keel {
Transformer::Transformer(const ModelWeights& weights, ThreadPool& pool) : w_(weights), pool_(pool) {
  // Sliding and global layers may rotate differently (Gemma); layers that agree share a table.
  std::vector<std::pair<const LayerSpec*, size_t>> seen;
  std::vector<size_t> index;
  for (const LayerSpec& l : w_.spec.layers) {
    size_t i = ropes_.size();
    for (const auto& [other, j] : seen)
      if (other->head_dim == l.head_dim && other->rope == l.rope) i = j;
    if (i == ropes_.size()) {
      ropes_.emplace_back(l.rope, l.head_dim);
      seen.emplace_back(&l, i);
    }
    index.push_back(i);
  }
  for (size_t i : index) layer_rope_.push_back(&ropes_[i]);  // after ropes_ stops growing
}

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
  ws_.x.resize(static_cast<size_t>(n * d));
  ws_.h.resize(static_cast<size_t>(n * d));
  for (int64_t t = 0; t < n; ++t) {
    float* row = ws_.x.data() + t * d;  // (dim)
    ops::decode_row(w_.embed, tokens[static_cast<size_t>(t)], row);
    if (s.embedding_scale != 1.0)
      for (int64_t i = 0; i < d; ++i) row[i] *= static_cast<float>(s.embedding_scale);
  }

  for (int64_t layer = 0; layer < s.num_layers; ++layer) {
    const LayerSpec& ls = s.layers[static_cast<size_t>(layer)];
    const LayerWeights& lw = w_.layers[static_cast<size_t>(layer)];
    arch::attention_block(s, ls, lw, layer, *layer_rope_[static_cast<size_t>(layer)], n, pos0, cache, pool_, ws_);
    if (ls.moe)
      arch::moe_ffn_block(s, ls, lw, n, pool_, ws_);
    else
      arch::gated_ffn_block(s, ls, lw, n, pool_, ws_);
    if (ls.layer_scalar)
      for (float& v : std::span(ws_.x.data(), static_cast<size_t>(n * d))) v *= lw.layer_scalar;
  }
  cache.set_size(pos0 + n);

  if (logit_rows.empty()) return;
  const int64_t m = static_cast<int64_t>(logit_rows.size());
  std::vector<float> last(static_cast<size_t>(m * d));  // (m, dim)
  for (int64_t i = 0; i < m; ++i) {
    const int64_t row = logit_rows[static_cast<size_t>(i)];
    if (row < 0 || row >= n) throw Error("logit row out of range");
    arch::norm_rows(s, w_.final_norm, ws_.x.data() + row * d, 1, last.data() + i * d);
  }
  ops::matmul(w_.output(), last.data(), m, logits, pool_);
  if (s.final_softcap > 0) ops::softcap_inplace(logits, m * s.vocab_size, static_cast<float>(s.final_softcap));
}

}  // namespace keel
