#include "keel/engine/forward_loop.h"

#include <algorithm>
#include <string>

#include "keel/util/error.h"

namespace keel {

void forward_tokens(Transformer& model, kv::KvSequence& sequence, std::span<const int32_t> ids,
                    std::span<const chat::Role> roles, std::span<const int64_t> rows, std::span<float> logits) {
  if (logits.size() < rows.size() * static_cast<size_t>(model.spec().vocab_size))
    throw Error("internal: the logits buffer holds fewer than " + std::to_string(rows.size()) + " rows");
  sequence.append_tokens(ids, roles);
  try {
    sequence.prepare_pass_alone();
    model.forward(ids, sequence, rows, logits.data());
  } catch (...) {
    sequence.set_size(sequence.size());
    throw;
  }
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
