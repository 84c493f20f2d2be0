#pragma once
// The generation loop for one sequence: chunked prefill of the prompt (logits only for its last
// token), then one decode step per new token until an end-of-sequence id, the token limit, the
// context limit, or the caller says stop.
#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "keel/arch/transformer.h"
#include "keel/engine/sampler.h"
#include "keel/kv/kv_cache.h"

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
};

class Generator {
 public:
  Generator(Transformer& model, KvCache& cache) : model_(model), cache_(cache) {}

  // `on_token` sees each generated id as it is sampled; returning false stops generation.
  GenerationResult generate(std::span<const int32_t> prompt, const GenerationOptions& options,
                            const std::function<bool(int32_t)>& on_token = {});

  // Feeds tokens through the model in chunks; returns the logits after the last one.
  std::vector<float> prefill(std::span<const int32_t> tokens, int64_t chunk);

 private:
  Transformer& model_;
  KvCache& cache_;
};

}  // namespace keel
