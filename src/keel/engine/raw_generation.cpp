#include "keel/engine/raw_generation.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "keel/engine/forward_loop.h"
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

GenerationResult generate_raw(Transformer& model, kv::KvSequence& sequence, std::span<const int32_t> prompt,
                              const GenerationOptions& options, const std::function<bool(int32_t)>& on_token) {
  using clock = std::chrono::steady_clock;
  if (prompt.empty()) throw Error("the prompt is empty");
  if (static_cast<int64_t>(prompt.size()) > sequence.capacity())
    throw Error("the prompt (" + std::to_string(prompt.size()) + " tokens) does not fit the context of " +
                std::to_string(sequence.capacity()) + " tokens");
  GenerationResult result;
  Sampler sampler(options.sampling);
  result.stats.prompt_tokens = static_cast<int64_t>(prompt.size());
  std::vector<float> logits(static_cast<size_t>(model.spec().vocab_size));

  const auto t0 = clock::now();
  const std::vector<chat::Role> roles(prompt.size(), chat::Role::user);
  prefill(model, sequence, prompt, roles, options.prefill_chunk, logits);
  const auto t1 = clock::now();
  result.stats.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();

  while (true) {
    if (static_cast<int64_t>(result.tokens.size()) >= options.max_tokens) {
      result.stop = StopReason::MaxTokens;
      break;
    }
    mask_logits(logits, options.masked_ids);
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
    if (sequence.size() >= sequence.capacity()) {
      result.stop = StopReason::ContextFull;
      break;
    }
    decode_step(model, sequence, next, logits);
  }
  result.stats.generated_tokens = static_cast<int64_t>(result.tokens.size());
  result.stats.decode_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  return result;
}

}  // namespace keel
