#pragma once
// The logits of every position of a token sequence, run as keel serves (paged KV pool under the
// lossless `full` policy), for tests that compare two loads of one model.
#include <cstdint>
#include <vector>

#include "keel/arch/transformer.h"
#include "keel/engine/forward_loop.h"
#include "keel/engine/standalone_sequence.h"
#include "keel/model/weights.h"
#include "keel/util/thread_pool.h"

namespace keel::test {

// (tokens.size(), vocab) logits.
inline std::vector<float> all_logits(const ModelWeights& w, const std::vector<int32_t>& tokens) {
  ThreadPool pool(2);
  Transformer model(w, pool);
  StandaloneSequence seq(w.spec, static_cast<int64_t>(tokens.size()) + 1);
  std::vector<int64_t> rows(tokens.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
  const std::vector<chat::Role> roles(tokens.size(), chat::Role::user);
  std::vector<float> logits(tokens.size() * static_cast<size_t>(w.spec.vocab_size));
  forward_tokens(model, seq.sequence(), tokens, roles, rows, logits);
  return logits;
}

}  // namespace keel::test
