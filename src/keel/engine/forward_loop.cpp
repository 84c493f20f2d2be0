#include "keel/engine/forward_loop.h"

#include <algorithm>
#include <string>
#include <vector>

#include "keel/util/error.h"

namespace keel {

void run_pass(Transformer& model, std::span<const SequencePass> batch) {
  if (batch.empty()) return;
  kv::KvPool& pool = batch.front().sequence->pool();
  const auto vocab = static_cast<size_t>(model.spec().vocab_size);
  for (const SequencePass& s : batch) {
    if (&s.sequence->pool() != &pool) throw InternalError("run_pass: sequences from two KV pools in one pass");
    if (s.tokens.size() != s.roles.size())
      throw InternalError("run_pass: " + std::to_string(s.tokens.size()) + " tokens but " + std::to_string(s.roles.size()) + " roles");
    if (s.logits.size() < s.logit_rows.size() * vocab)
      throw InternalError("run_pass: the logits buffer holds fewer than " + std::to_string(s.logit_rows.size()) + " rows");
  }
  std::vector<ForwardSegment> segments;
  segments.reserve(batch.size());
  size_t appended = 0;
  try {
    for (const SequencePass& s : batch) {
      s.sequence->append_tokens(s.tokens, s.roles);
      ++appended;
      segments.push_back({s.tokens, s.sequence, s.logit_rows, s.logits.data()});
    }
    int64_t quantize_bytes = 0;
    for (const SequencePass& s : batch) quantize_bytes += s.sequence->prepare_pass();
    pool.make_room(quantize_bytes);
    model.forward(segments);
  } catch (...) {
    for (size_t i = 0; i < appended; ++i) batch[i].sequence->set_size(batch[i].sequence->size());
    throw;
  }
}

void forward_tokens(Transformer& model, kv::KvSequence& sequence, std::span<const int32_t> ids,
                    std::span<const chat::Role> roles, std::span<const int64_t> rows, std::span<float> logits) {
  const SequencePass pass{&sequence, ids, roles, rows, logits};
  run_pass(model, std::span(&pass, 1));
}

PrefillResult prefill(Transformer& model, kv::KvSequence& sequence, std::span<const int32_t> ids,
                      std::span<const chat::Role> roles, int64_t chunk, std::span<float> logits,
                      const std::atomic<bool>* cancelled) {
  if (chunk <= 0) throw Error("prefill chunk must be positive");
  if (ids.size() != roles.size())
    throw Error("prefill: " + std::to_string(ids.size()) + " token ids but " + std::to_string(roles.size()) + " roles");
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t held = sequence.size();
  if (held >= n) throw Error("internal: prefill of " + std::to_string(n) + " tokens into a sequence of " + std::to_string(held));
  // What the sequence holds is reused as the start of `ids`: it has to be exactly that.
  const auto have = sequence.token_ids();
  if (static_cast<int64_t>(have.size()) != held || !std::equal(have.begin(), have.end(), ids.begin()))
    throw Error("internal: the KV sequence does not hold a prefix of the tokens to prefill");

  PrefillResult result;
  for (int64_t at = held; at < n; at += chunk) {
    if (cancelled && cancelled->load(std::memory_order_relaxed)) {
      result.cancelled = true;
      break;
    }
    const int64_t len = std::min(chunk, n - at);
    const int64_t row = len - 1;
    const bool last = at + len == n;
    forward_tokens(model, sequence, ids.subspan(static_cast<size_t>(at), static_cast<size_t>(len)),
                   roles.subspan(static_cast<size_t>(at), static_cast<size_t>(len)),
                   last ? std::span<const int64_t>(&row, 1) : std::span<const int64_t>(), logits);
    result.prefilled += len;
  }
  return result;
}

void decode_step(Transformer& model, kv::KvSequence& sequence, int32_t id, std::span<float> logits) {
  const int64_t row = 0;
  const chat::Role role = chat::Role::assistant;
  forward_tokens(model, sequence, std::span<const int32_t>(&id, 1), std::span<const chat::Role>(&role, 1),
                 std::span<const int64_t>(&row, 1), logits);
}

}  // namespace keel
