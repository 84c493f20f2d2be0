#pragma once
// One assistant turn of a chat request, from prepared prompt to parsed output: reuse the cached
// prefix, prefill the rest, decode, split the output into text, reasoning and tool calls, check
// every call against its tool's schema and regenerate an invalid one from where it began.
//
// Threads: a Turn, like run_turn, runs on the one thread that owns the model's forward pass and the
// SessionCache: the engine thread in `keel serve` (engine/scheduler.h), the caller's in eval. emit,
// options.on_reuse and options.logits_processor are called on that thread, inside the Turn's
// methods; only *options.cancelled is set from another thread (an HTTP thread), and only read here.
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "keel/engine/forward_loop.h"
#include "keel/engine/sampler.h"
#include "keel/engine/served_model.h"
#include "keel/engine/session_cache.h"
#include "keel/engine/stop_matcher.h"
#include "keel/engine/token_logprobs.h"
#include "keel/toolcall/tool_call_parser.h"

namespace keel {

struct OutputGrammars;  // engine/output_constraint.h

// What the request allows or demands of tool calls (Anthropic tool_choice / OpenAI tool_choice).
enum class ToolUse { Auto, Required, Named, Disabled };

struct TurnOptions {
  int64_t max_tokens = 256;  // tokens sampled or forced, those of retried calls included
  SamplingParams sampling;
  // OpenAI's adjustments, applied to the logits before each sample (after the model, before the
  // masks): logit += bias[id]; logit -= presence_penalty if the turn has written the token, and
  // frequency_penalty times the number of times it has. Greedy sampling sees them too.
  std::vector<std::pair<int32_t, float>> logit_bias;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // As Hugging Face and vLLM define it, after the two above: every token of the prompt or the
  // output so far has a positive logit divided by it and a negative one multiplied. 1: off.
  float repetition_penalty = 1.0f;
  // Report each output token's log probability (token_logprobs.h) with this many alternatives
  // (0-20), as TurnEvent::Kind::Logprobs events. nullopt: none.
  std::optional<int> top_logprobs;
  std::vector<std::string> stop_sequences;
  nlohmann::ordered_json tools;  // function form, or null
  ToolUse tool_use = ToolUse::Auto;
  std::string tool_name;  // ToolUse::Named
  bool parallel_tool_calls = true;
  int tool_retries = 2;
  // Grammars the output must follow (structured answer, constrained tool calls): null for none.
  std::shared_ptr<const OutputGrammars> grammars;
  bool reasoning = false;  // split the model's reasoning block out of the text
  // At most this many reasoning tokens: then keel writes the format's end-of-reasoning marker
  // (toolcall::reasoning_closer) and the model goes on to its answer. nullopt: no limit.
  std::optional<int64_t> reasoning_budget;
  int64_t prefill_chunk = 256;
  // The prefix-cache namespace the turn reuses and publishes in (SessionCache::begin): keel serve
  // gives each of several API keys its own, so one key's prompts cannot be probed through another's
  // cache hits. 0: the shared namespace.
  uint64_t cache_salt = 0;
  // Set by the client side: the turn stops before its next prefill chunk or decode step.
  const std::atomic<bool>* cancelled = nullptr;
  // Applied to the logits before each sample, given the turn's tokens so far, before the masks
  // (padding rows, grammars). A seam for logit biases and for tests that script a model's output.
  std::function<void(std::span<const int32_t> generated, std::span<float> logits)> logits_processor;
  // Called once the cached prefix is known, before prefill: how many prompt tokens it covers.
  std::function<void(int64_t reused_tokens)> on_reuse;
};

struct TurnEvent {
  enum class Kind { Text, Reasoning, ToolCall, Logprobs };
  Kind kind = Kind::Text;
  std::string text;
  std::string name;                   // ToolCall
  nlohmann::ordered_json arguments;  // ToolCall: checked and coerced against the schema
  // Logprobs: the next output tokens', in order, once no retry can take them back (each token of
  // the output once: text, reasoning and call tokens alike, a forced marker's too). They may come
  // before or after the events that carry their text.
  std::vector<TokenLogprob> logprobs;
};

enum class TurnFinish { EndTurn, MaxTokens, StopSequence, ToolUse, Cancelled, ContextFull };

struct TurnStats {
  int64_t prompt_tokens = 0;
  int64_t reused_tokens = 0;     // served from the cache, not prefilled
  int64_t prefilled_tokens = 0;  // prompt tokens run through the model (fewer when cancelled)
  int64_t output_tokens = 0;     // every token generated, retried ones and a budget's marker included
  int64_t reasoning_tokens = 0;  // generated inside a reasoning block
  int64_t valid_calls = 0;
  int64_t invalid_calls = 0;     // still invalid after the retries: reported to the client as text
  int64_t retries = 0;
  int64_t constrained_tokens = 0;  // sampled under a grammar (output_constraint.h)
  double mask_seconds = 0;         // spent computing the grammars' token masks
  double prefill_seconds = 0;
  double first_token_seconds = 0;  // from the start of the turn
  double decode_seconds = 0;
};

struct TurnResult {
  TurnFinish finish = TurnFinish::EndTurn;
  std::string stop_sequence;
  TurnStats stats;
};

class TurnRunner;

// One turn as a state machine: between forward passes it samples, parses, checks calls and emits
// events; the passes themselves are its driver's (run_turn below for one turn, engine/scheduler for
// many at once in batched passes). A retry of an invalid call, the prompt's prefill and each
// decoded token are all just "tokens to run before the next sample".
//
// Threads: the engine thread only, like the SessionCache and model it uses. The prompt, options
// and session must outlive the Turn.
class Turn {
 public:
  // `affinity`: the key its sequence stays live under afterwards (SessionCache).
  Turn(ServedModel& model, SessionCache& session, const PreparedPrompt& prompt, const TurnOptions& options,
       std::function<void(TurnEvent&&)> emit, std::string affinity = {});
  ~Turn();  // a turn that still holds a sequence hands it back to the session
  Turn(const Turn&) = delete;
  Turn& operator=(const Turn&) = delete;

  // Takes a sequence from the session (reusing the longest cached prefix) and, the first time,
  // reports the reuse through options.on_reuse. After suspend(), begins again where it was: its
  // prompt and kept output are reused from the cache where they are still there, recomputed where
  // not, with the same logits either way. Throws keel::Error for a prompt that leaves no room.
  void start();
  bool started() const;  // holds a sequence
  bool done() const;
  bool prefilled() const;  // the whole prompt has run
  // Offers the sequence's complete blocks to the prefix cache now, for turns with the same prompt
  // (Scheduler's followers); they are offered anyway when the turn ends.
  void share_prompt();

  // The next pass's share: up to `max_tokens` (> 0) of the tokens that must run before the next
  // sample (the rest of the prompt, the token just sampled, or what a rewind replays), for the
  // driver's run_pass (engine/forward_loop.h). Its logits row is asked for only when it holds the
  // last of them. nullopt when the turn ends instead (cancelled). A pass that fails leaves the
  // tokens pending.
  std::optional<SequencePass> next_segment(int64_t max_tokens);
  // Tokens still to run before the next sample.
  int64_t pending_tokens() const;
  // After the pass that ran next_segment's tokens: once they were the last, samples and goes on.
  void after_pass();
  // Hands the sequence back (its complete blocks stay cached) to free memory; start() resumes.
  void suspend();
  // The KV rows the sequence holds now.
  int64_t sequence_size() const;

  // Once done(): the result. The sequence has gone back to the session (live under the affinity).
  TurnResult result() const;

 private:
  std::unique_ptr<TurnRunner> runner_;
};

// One turn to its end, its passes run one at a time: Turn with the simplest driver. On the engine
// thread. `emit` sees the output as it becomes final. The prompt must leave room for at least one
// token (prompt.ids.size() < session.capacity()); callers answer a longer one with a client error
// before queueing it. `affinity` as for Turn.
TurnResult run_turn(ServedModel& model, SessionCache& session, const PreparedPrompt& prompt,
                    const TurnOptions& options, const std::function<void(TurnEvent&&)>& emit,
                    const std::string& affinity = {});

}  // namespace keel
