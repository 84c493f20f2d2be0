#pragma once
// A KV sequence on a pool of its own, for callers that run one sequence and share nothing with
// other requests: `keel run`, `keel bench`, eval fidelity's arms and tests. The pool is capped at
// what one sequence of `context` tokens can need under any policy, and fills block by block, so a
// large context costs nothing until its tokens run. The pool stays reachable for prefix reuse.
//
// Threads: like KvPool and KvSequence (keel/kv/kv_pool.h).
#include <cstdint>
#include <memory>

#include "keel/kv/kv_policy.h"
#include "keel/kv/kv_pool.h"
#include "keel/kv/kv_sequence.h"
#include "keel/model/model_spec.h"

namespace keel {

class StandaloneSequence {
 public:
  // The default policy is `full`: every K/V row bf16, nothing lost (what the goldens check).
  // Throws keel::Error when context < 1 or the pool rejects the policy for this model.
  StandaloneSequence(const ModelSpec& spec, int64_t context, kv::KvPolicy policy = kv::KvPolicy(),
                     bool rotate = true);

  kv::KvSequence& sequence() { return *sequence_; }
  kv::KvPool& pool() { return pool_; }

  // Twice the bytes of `context` tokens' blocks at bf16 in every layer: a quantized block holds
  // both forms while it is inside a window, and no policy stores more than bf16 otherwise.
  static int64_t budget_bytes(const ModelSpec& spec, int64_t context);

 private:
  kv::KvPool pool_;
  std::unique_ptr<kv::KvSequence> sequence_;  // destroyed before the pool, as the pool requires
};

}  // namespace keel
