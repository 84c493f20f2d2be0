#pragma once
// The forward pass of the Llama family of decoder-only transformers, which covers llama, mistral,
// qwen2 (q/k/v bias) and qwen3 (per-head q/k RMSNorm): RMSNorm, GQA attention with RoPE, SwiGLU.
#include <cstdint>
#include <span>
#include <vector>

#include "keel/kv/kv_cache.h"
#include "keel/model/weights.h"
#include "keel/ops/elementwise.h"
#include "keel/util/thread_pool.h"

namespace keel {

class Transformer {
 public:
  Transformer(const ModelWeights& weights, ThreadPool& pool);

  const ModelSpec& spec() const { return w_.spec; }
  const ModelWeights& weights() const { return w_; }

  // Runs `tokens` at positions [cache.size(), cache.size() + tokens.size()), stores their K/V and
  // grows the cache. Logits are computed only for the token indexes in `logit_rows` (the output
  // projection is the largest matrix; a prefill usually needs one row) and written to
  // `logits` as [logit_rows.size()][vocab_size].
  void forward(std::span<const int32_t> tokens, KvCache& cache, std::span<const int64_t> logit_rows,
               float* logits);

 private:
  void attention_block(const LayerWeights& l, int64_t layer, int64_t n, int64_t pos0, KvCache& cache);
  void mlp_block(const LayerWeights& l, int64_t n);

  const ModelWeights& w_;
  ThreadPool& pool_;
  ops::Rope rope_;
  // Activations for the current chunk, [tokens][width]; resized per call.
  std::vector<float> x_, h_, q_, k_, v_, attn_, gate_, up_;
  std::vector<std::vector<float>> scores_;  // per-thread attention scratch
};

}  // namespace keel
