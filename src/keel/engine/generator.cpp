#include "keel/engine/generator.h"

#include <algorithm>

#include "keel/util/error.h"

namespace keel {

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::EndOfSequence: return "end_of_sequence";
    case StopReason::MaxTokens: return "max_tokens";
    case StopReason::ContextFull: return "context_full";
    case StopReason::Cancelled: return "cancelled";
  }
  return "?";
}

std::vector<float> Generator::prefill(std::span<const int32_t> tokens, int64_t chunk) {
  if (tokens.empty()) throw Error("the prompt is empty");
  if (chunk <= 0) throw Error("prefill chunk must be positive");
  std::vector<float> logits(static_cast<size_t>(model_.spec().vocab_size));
  const int64_t n = static_cast<int64_t>(tokens.size());
  for (int64_t start = 0; start < n; start += chunk) {
    const int64_t len = std::min(chunk, n - start);
    const bool last = start + len == n;
    const int64_t row = len - 1;
    model_.forward(tokens.subspan(static_cast<size_t>(start), static_cast<size_t>(len)), cache_,
                   last ? std::span<const int64_t>(&row, 1) : std::span<const int64_t>(), logits.data());
  }
  return logits;
}

GenerationResult Generator::generate(std::span<const int32_t> prompt, const GenerationOptions& options,
                                     const std::function<bool(int32_t)>& on_token) {
  using clock = std::chrono::steady_clock;
  if (static_cast<int64_t>(prompt.size()) + cache_.size() > cache_.capacity())
    throw Error("the prompt (" + std::to_string(prompt.size()) + " tokens) does not fit the context of " +
                std::to_string(cache_.capacity()) + " tokens");
  GenerationResult result;
  Sampler sampler(options.sampling);
  result.stats.prompt_tokens = static_cast<int64_t>(prompt.size());

  auto t0 = clock::now();
  std::vector<float> logits = prefill(prompt, options.prefill_chunk);
  auto t1 = clock::now();
  result.stats.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();

  const int64_t row = 0;
  while (true) {
    if (static_cast<int64_t>(result.tokens.size()) >= options.max_tokens) {
      result.stop = StopReason::MaxTokens;
      break;
    }
    const int32_t next = sampler.sample(logits);
    if (std::find(options.stop_ids.begin(), options.stop_ids.end(), next) != options.stop_ids.end()) {
      result.stop = StopReason::EndOfSequence;
      break;
    }
    result.tokens.push_back(next);
    if (on_token && !on_token(next)) {
      result.stop = StopReason::Cancelled;
      break;
    }
    if (static_cast<int64_t>(result.tokens.size()) >= options.max_tokens) {
      result.stop = StopReason::MaxTokens;
      break;
    }
    if (cache_.size() >= cache_.capacity()) {
      result.stop = StopReason::ContextFull;
      break;
    }
    model_.forward(std::span<const int32_t>(&next, 1), cache_, std::span<const int64_t>(&row, 1), logits.data());
  }
  result.stats.generated_tokens = static_cast<int64_t>(result.tokens.size());
  result.stats.decode_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  return result;
}

}  // namespace keel
