#pragma once
// `keel run`'s generation: a raw prompt (no chat template) prefilled in chunks, then one sampled
// token per decode step until an end-of-sequence id, the token limit, a full context, or the
// caller says stop. The model runs through engine/forward_loop like every other caller.
//
// Threads: the caller's, which owns `model` and `sequence` for the call.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "keel/arch/transformer.h"
#include "keel/engine/sampler.h"
#include "keel/kv/kv_sequence.h"

namespace keel {

enum class StopReason { EndOfSequence, MaxTokens, ContextFull, Cancelled };
const char* stop_reason_name(StopReason r);

struct GenerationStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated ids, the end-of-sequence id excluded
  StopReason stop = StopReason::MaxTokens;
  GenerationStats stats;
};

struct GenerationOptions {
  int64_t max_tokens = 256;
  int64_t prefill_chunk = 256;  // tokens per forward pass while reading the prompt
  SamplingParams sampling;
  std::vector<int32_t> stop_ids;  // end-of-sequence ids
  std::vector<int32_t> masked_ids;  // never sampled: rows no token has (ids_without_token)
};

// The prompt's tokens carry chat::Role::user, the generated ones chat::Role::assistant. `sequence`
// holds nothing or a prefix of `prompt` (a reused one). `on_token` sees each generated id as it is
// sampled; returning false stops generation. The last sampled token is never run: its logits are
// not needed. Throws keel::Error when the prompt does not fit the sequence's capacity.
GenerationResult generate_raw(Transformer& model, kv::KvSequence& sequence, std::span<const int32_t> prompt,
                              const GenerationOptions& options, const std::function<bool(int32_t)>& on_token = {});

}  // namespace keel
