#pragma once
// The forward pass of a decoder-only transformer, built from the shared blocks (blocks.h) layer by
// layer as each LayerSpec says: embeddings (scaled for Gemma), then per layer the attention block
// and the gated FFN block, then the final norm, the output projection and an optional logit
// soft-cap. Which families it runs is decided in arch/registry.cpp (see family.h).
//
// Thread-safety: one forward() at a time per Transformer (the engine thread); it fans the matrix
// products out over the ThreadPool. The weights it reads are shared and read-only.
#include <cstdint>
#include <span>
#include <vector>

#include "keel/arch/blocks.h"
#include "keel/kv/kv_cache.h"
#include "keel/model/weights.h"
#include "keel/ops/elementwise.h"
#include "keel/util/thread_pool.h"

namespace keel {

// One sequence's share of a forward pass.
struct ForwardSegment {
  std::span<const int32_t> tokens;      // run at positions [cache->size(), cache->size() + tokens.size())
  KvCache* cache = nullptr;             // the sequence's K/V: stored into, read, and grown by the pass
  std::span<const int64_t> logit_rows;  // token indexes (within `tokens`) whose logits are wanted
  float* logits = nullptr;              // (logit_rows.size(), vocab_size)
};

class Transformer {
 public:
  Transformer(const ModelWeights& weights, ThreadPool& pool);

  const ModelSpec& spec() const { return w_.spec; }
  const ModelWeights& weights() const { return w_; }

  // Runs each segment's tokens at positions [cache->size(), cache->size() + tokens.size()),
  // stores their K/V and grows the cache; logits only for the `logit_rows` asked for (the output
  // projection is the largest matrix; a prefill usually needs one row). One pass over several
  // sequences (a batch; each cache at most once) reads every matrix once for all of them, while
  // each sequence stores and attends only its own K/V. Every row's arithmetic is independent of
  // the others' (the kernels sum in one fixed order whatever the row count), so each segment's
  // logits are bit-identical to a pass of it alone. Throws before anything is stored if a segment
  // is invalid. Its caller is engine/forward_loop.h's run_pass, which takes the KV the pass needs
  // before it and undoes the appended tokens when it throws.
  void forward(std::span<const ForwardSegment> batch);

 private:
  const ModelWeights& w_;
  ThreadPool& pool_;
  std::vector<ops::Rope> ropes_;            // one per distinct (RopeSpec, head_dim)
  std::vector<const ops::Rope*> layer_rope_;  // (num_layers) into ropes_
  arch::Workspace ws_;
};

}  // namespace keel
