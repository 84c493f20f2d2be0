#include "keel/arch/transformer.h"

#include <algorithm>

#include "keel/arch/linear_attention.h"
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

void Transformer::forward(std::span<const ForwardSegment> batch) {
  const ModelSpec& s = w_.spec;
  int64_t n = 0, m = 0;
  for (const ForwardSegment& seg : batch) {
    const auto len = static_cast<int64_t>(seg.tokens.size());
    if (!seg.cache) throw InternalError("forward: a segment without a KV cache");
    if (seg.cache->size() + len > seg.cache->capacity())
      throw Error("context full: " + std::to_string(seg.cache->size() + len) + " tokens exceed the context size of " +
                  std::to_string(seg.cache->capacity()));
    for (int32_t t : seg.tokens)
      if (t < 0 || t >= s.vocab_size)
        throw Error("token id " + std::to_string(t) + " is outside the vocabulary (0.." + std::to_string(s.vocab_size - 1) + ")");
    for (int64_t row : seg.logit_rows)
      if (row < 0 || row >= len) throw Error("logit row out of range");
    for (const ForwardSegment& other : batch)
      if (&other != &seg && other.cache == seg.cache) throw InternalError("forward: one KV cache in two segments");
    n += len;
    m += static_cast<int64_t>(seg.logit_rows.size());
  }
  if (n == 0) return;

  const int64_t d = s.hidden_size;
  ws_.x.resize(static_cast<size_t>(n * d));
  ws_.h.resize(static_cast<size_t>(n * d));
  ws_.rows.clear();
  for (const ForwardSegment& seg : batch) {
    const int64_t pos0 = seg.cache->size();
    for (size_t i = 0; i < seg.tokens.size(); ++i) {
      float* row = ws_.x.data() + static_cast<int64_t>(ws_.rows.size()) * d;  // (dim)
      ops::decode_row(w_.embed, seg.tokens[i], row);
      if (s.embedding_scale != 1.0)
        for (int64_t j = 0; j < d; ++j) row[j] *= static_cast<float>(s.embedding_scale);
      ws_.rows.push_back({pos0 + static_cast<int64_t>(i), seg.cache});
    }
  }

  for (int64_t layer = 0; layer < s.num_layers; ++layer) {
    const LayerSpec& ls = s.layers[static_cast<size_t>(layer)];
    const LayerWeights& lw = w_.layers[static_cast<size_t>(layer)];
    if (ls.attention == AttentionKind::Linear)
      arch::linear_attention_block(s, ls, lw, layer, n, pool_, ws_);
    else
      arch::attention_block(s, ls, lw, layer, *layer_rope_[static_cast<size_t>(layer)], n, pool_, ws_);
    if (ls.moe)
      arch::moe_ffn_block(s, ls, lw, n, pool_, ws_);
    else
      arch::gated_ffn_block(s, ls, lw, n, pool_, ws_);
    if (ls.layer_scalar)
      for (float& v : std::span(ws_.x.data(), static_cast<size_t>(n * d))) v *= lw.layer_scalar;
  }
  for (const ForwardSegment& seg : batch) seg.cache->set_size(seg.cache->size() + static_cast<int64_t>(seg.tokens.size()));

  if (m == 0) return;
  // The wanted rows of every segment through one output projection, then back to their owners.
  std::vector<float> last(static_cast<size_t>(m * d));  // (m, dim)
  std::vector<float> out(static_cast<size_t>(m * s.vocab_size));  // (m, vocab)
  int64_t at = 0, first_row = 0;
  for (const ForwardSegment& seg : batch) {
    for (int64_t row : seg.logit_rows)
      arch::norm_rows(s, w_.final_norm, ws_.x.data() + (first_row + row) * d, 1, last.data() + (at++) * d);
    first_row += static_cast<int64_t>(seg.tokens.size());
  }
  ops::matmul(w_.output(), last.data(), m, out.data(), pool_);
  if (s.final_softcap > 0) ops::softcap_inplace(out.data(), m * s.vocab_size, static_cast<float>(s.final_softcap));
  at = 0;
  for (const ForwardSegment& seg : batch) {
    const auto count = static_cast<int64_t>(seg.logit_rows.size());
    std::copy_n(out.data() + at * s.vocab_size, count * s.vocab_size, seg.logits);
    at += count;
  }
}

}  // namespace keel
