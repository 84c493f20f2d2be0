#include "keel/engine/chat_turn.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>

#include "keel/engine/forward_loop.h"
#include "keel/text/stream_decoder.h"
#include "keel/toolcall/output_syntax.h"
#include "keel/toolcall/schema_check.h"
#include "keel/util/error.h"

namespace keel {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A retry must be able to come out differently, so it never samples greedily.
constexpr double kRetryMinTemperature = 0.7;

class TurnRunner {
  enum class Handled { Continue, Rewound };

 public:
  TurnRunner(ServedModel& model, SessionCache& session, const PreparedPrompt& prompt, const TurnOptions& options,
             const std::function<void(TurnEvent&&)>& emit)
      : model_(model),
        session_(session),
        prompt_(prompt),
        options_(options),
        emit_(emit),
        decoder_(model.tokenizer()),
        stop_(options.stop_sequences),
        sampler_(options.sampling),
        logits_(static_cast<size_t>(model.weights().spec.vocab_size)) {
    parser_options_.format = model.tool_call_format().format;
    parser_options_.reasoning = options.reasoning;
    parser_options_.starts_in_reasoning = prompt.starts_in_reasoning;
    parser_ = toolcall::make_output_parser(parser_options_);
  }

  TurnResult run() {
    const auto start = Clock::now();
    result_.stats.prompt_tokens = static_cast<int64_t>(prompt_.ids.size());
    prefill();
    // The next turn re-renders this prompt and diverges in the answer: keep what sliding-window
    // layers need to resume from here.
    session_.sequence().keep_window_for_branch();
    result_.stats.prefill_seconds = seconds_since(start);
    const auto decode_start = Clock::now();
    if (!done_) decode(start);
    result_.stats.decode_seconds = seconds_since(decode_start);
    result_.stats.output_tokens = produced_;
    result_.stats.reasoning_tokens = reasoning_generated_;
    session_.publish();
    if (result_.finish == TurnFinish::EndTurn && result_.stats.valid_calls > 0) result_.finish = TurnFinish::ToolUse;
    return result_;
  }

 private:
  // Why the output ended, for the reason a cut-off tool call is reported with.
  enum class OutputEnd { EndOfSequence, MaxTokens, ContextFull };

  void prefill() {
    const int64_t n = static_cast<int64_t>(prompt_.ids.size());
    if (n >= session_.capacity())
      throw Error("the prompt (" + std::to_string(n) + " tokens) leaves no room in the context of " +
                  std::to_string(session_.capacity()) + " tokens");
    const int64_t reused = session_.begin(prompt_.ids, prompt_.roles, options_.cache_salt);
    result_.stats.reused_tokens = reused;
    if (options_.on_reuse) options_.on_reuse(reused);
    const PrefillResult r = keel::prefill(model_.transformer(), session_.sequence(), prompt_.ids, prompt_.roles,
                                          options_.prefill_chunk, logits_, options_.cancelled);
    result_.stats.prefilled_tokens = r.prefilled;
    if (r.cancelled) finish(TurnFinish::Cancelled);
  }

  bool cancelled() const { return options_.cancelled && options_.cancelled->load(std::memory_order_relaxed); }

  // Ends the output: the model's end of sequence, a special token its format says ends the turn
  // (Harmony's <|call|>), or a special token that is not syntax of its output format (a model
  // that opens a new turn with <|im_start|> has finished this one).
  bool ends_output(int32_t id) const {
    const auto& eos = model_.weights().eos_token_ids;
    if (std::find(eos.begin(), eos.end(), id) != eos.end()) return true;
    const text::Tokenizer& tok = model_.tokenizer();
    if (!tok.is_special(id)) return false;
    const std::string_view token = tok.token_text(id);
    return toolcall::ends_turn(parser_options_.format, token) || !toolcall::is_output_syntax(parser_options_.format, token);
  }

  // The next token: the budget's end-of-reasoning marker while it is being written, else sampled.
  int32_t next_token() {
    if (!forced_.empty()) {
      const int32_t id = forced_.front();
      forced_.erase(forced_.begin());
      return id;
    }
    if (options_.logits_processor) options_.logits_processor(generated_, logits_);
    return sampler_.sample(logits_);
  }

  // Once the reasoning budget is spent inside a reasoning block, the format's closer is written
  // for the model, token by token, and it goes on to its answer.
  void enforce_reasoning_budget() {
    if (!options_.reasoning_budget || budget_closed_ || !forced_.empty() || !parser_->in_reasoning()) return;
    if (reasoning_generated_ < *options_.reasoning_budget) return;
    const std::string_view closer = toolcall::reasoning_closer(parser_options_.format);
    if (closer.empty()) return;
    forced_ = model_.tokenizer().encode(closer);
    budget_closed_ = true;
  }

  // max_tokens bounds every token sampled, retried ones included (produced_, not generated_), so
  // tool-call retries cannot make a turn cost more than the client allowed.
  void decode(Clock::time_point start) {
    while (!done_) {
      if (cancelled()) return finish(TurnFinish::Cancelled);
      if (produced_ >= options_.max_tokens) break;
      enforce_reasoning_budget();
      const bool forced = !forced_.empty();
      const int32_t next = next_token();
      if (produced_++ == 0) result_.stats.first_token_seconds = seconds_since(start);
      if (ends_output(next)) {
        if (end_of_output(TurnFinish::EndTurn, OutputEnd::EndOfSequence) == Handled::Rewound) continue;
        return;
      }
      generated_.push_back(next);
      const std::string piece = decoder_.feed(next);
      text_ += piece;
      token_ends_.push_back(text_.size());
      std::vector<toolcall::ParseEvent> events;
      const bool was_reasoning = parser_->in_reasoning();
      parser_->feed(piece, events);
      // Tokens inside the block count, not the markers that open or close it.
      if (!forced && was_reasoning && parser_->in_reasoning()) ++reasoning_generated_;
      if (handle(events) == Handled::Rewound) continue;
      if (done_) return;
      if (produced_ >= options_.max_tokens) break;
      if (session_.size() >= session_.capacity()) {
        end_of_output(TurnFinish::ContextFull, OutputEnd::ContextFull);
        return;
      }
      decode_step(model_.transformer(), session_.sequence(), next, logits_);
    }
    if (!done_) end_of_output(TurnFinish::MaxTokens, OutputEnd::MaxTokens);
  }

  void finish(TurnFinish how) {
    if (done_) return;
    result_.finish = how;
    done_ = true;
  }

  // The output ended: release what is held back. A tool call cut off by the model's own end of
  // sequence is an invalid call like any other and is regenerated (Rewound); one cut off by the
  // token limit or a full context has nothing left to regenerate from.
  Handled end_of_output(TurnFinish how, OutputEnd why) {
    const std::string tail = decoder_.flush();
    text_ += tail;
    std::vector<toolcall::ParseEvent> events;
    parser_->feed(tail, events);
    parser_->finish(events);
    output_end_ = why;
    no_more_retries_ = why != OutputEnd::EndOfSequence;
    if (handle(events) == Handled::Rewound) return Handled::Rewound;
    if (!done_ && options_.tool_use != ToolUse::Auto && options_.tool_use != ToolUse::Disabled &&
        result_.stats.valid_calls == 0)
      emit_text_now("[keel: the request requires a tool call and the model made none]");
    if (!done_) emit_text_now(stop_.flush());
    finish(how);
    return Handled::Continue;
  }

  Handled handle(std::vector<toolcall::ParseEvent>& events) {
    for (auto& e : events) {
      if (done_) break;
      switch (e.kind) {
        case toolcall::ParseEvent::Kind::Text:
          emit_text(e.text);
          break;
        case toolcall::ParseEvent::Kind::Reasoning:
          if (!e.text.empty()) emit_(TurnEvent{TurnEvent::Kind::Reasoning, std::move(e.text), {}, {}});
          break;
        case toolcall::ParseEvent::Kind::Call:
          if (options_.tool_use == ToolUse::Disabled || options_.tools.is_null()) {
            emit_text(e.call.raw);
            break;
          }
          if (handle_call(e.call) == Handled::Rewound) return Handled::Rewound;
          break;
      }
    }
    return Handled::Continue;
  }

  // Parser-level text: skips what a rewind replays, then goes through the stop sequences.
  void emit_text(const std::string& text) {
    size_t skip = std::min(replayed_text_to_skip_, text.size());
    replayed_text_to_skip_ -= skip;
    parser_text_bytes_ += text.size() - skip;
    std::string out = stop_.feed(std::string_view(text).substr(skip));
    emit_text_now(out);
    if (stop_.matched()) {
      result_.stop_sequence = stop_.matched_sequence();
      finish(TurnFinish::StopSequence);
    }
  }

  void emit_text_now(const std::string& text) {
    if (!text.empty()) emit_(TurnEvent{TurnEvent::Kind::Text, text, {}, {}});
  }

  Handled handle_call(const toolcall::ParsedCall& call) {
    toolcall::CheckedCall checked = toolcall::check_tool_call(call, options_.tools);
    if (call.truncated) checked.reason += cut_off_cause();
    if (checked.valid && options_.tool_use == ToolUse::Named && checked.name != options_.tool_name) {
      checked.valid = false;
      checked.reason = "the request requires a call to \"" + options_.tool_name + "\"";
    }
    if (checked.valid) {
      ++result_.stats.valid_calls;
      emit_(TurnEvent{TurnEvent::Kind::ToolCall, {}, std::move(checked.name), std::move(checked.arguments)});
      if (!options_.parallel_tool_calls) finish(TurnFinish::ToolUse);
      return Handled::Continue;
    }
    // A retry needs tokens left under max_tokens: else the call is reported now, not dropped.
    if (!no_more_retries_ && attempts_ < options_.tool_retries && produced_ < options_.max_tokens &&
        rewind_before(call)) {
      ++attempts_;
      ++result_.stats.retries;
      return Handled::Rewound;
    }
    ++result_.stats.invalid_calls;
    const std::string name = call.name.empty() ? std::string("a tool") : "\"" + call.name + "\"";
    emit_text_now(stop_.flush());
    emit_text_now("[keel: the model's call to " + name + " was invalid (" + checked.reason + ") after " +
                  std::to_string(attempts_) + " " + (attempts_ == 1 ? "retry" : "retries") +
                  "; it was not passed on]");
    return Handled::Continue;
  }

  std::string cut_off_cause() const {
    switch (output_end_) {
      case OutputEnd::EndOfSequence: return " (the model ended its output there)";
      case OutputEnd::MaxTokens: return " (max_tokens reached)";
      case OutputEnd::ContextFull: return " (the context is full)";
    }
    return {};
  }

  // Drops the invalid call and everything after it, from the cache too, and samples again from
  // the token where the call began. Returns false if the call cannot be located in the output.
  bool rewind_before(const toolcall::ParsedCall& call) {
    const size_t call_start = call.raw.empty() ? std::string::npos : text_.rfind(call.raw);
    if (call_start == std::string::npos) return false;
    // The first token holding a byte of the call; keep it only if it also holds text before the call.
    size_t first = 0;
    while (first < token_ends_.size() && token_ends_[first] <= call_start) ++first;
    const size_t token_start = first == 0 ? 0 : token_ends_[first - 1];
    const size_t keep = token_start == call_start ? first : first + 1;

    generated_.resize(keep);
    token_ends_.resize(keep);
    text_.resize(keep == 0 ? 0 : token_ends_.back());
    decoder_.flush();
    for (int32_t id : generated_) decoder_.feed(id);

    // A fresh parser replays the kept text; what it releases was sent already.
    parser_ = toolcall::make_output_parser(parser_options_);
    std::vector<toolcall::ParseEvent> replay;
    parser_->feed(text_, replay);
    size_t replayed = 0;
    for (const auto& e : replay)
      if (e.kind == toolcall::ParseEvent::Kind::Text) replayed += e.text.size();
    replayed_text_to_skip_ = parser_text_bytes_ > replayed ? parser_text_bytes_ - replayed : 0;
    parser_text_bytes_ -= replayed_text_to_skip_;

    forced_.clear();
    restore();
    SamplingParams retry = options_.sampling;
    retry.temperature = std::max(retry.temperature, kRetryMinTemperature);
    retry.seed = options_.sampling.seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(attempts_ + 1);
    sampler_ = Sampler(retry);
    return true;
  }

  // Makes the cache hold exactly prompt + kept output, with the logits after the last of them
  // (recomputed: bit-identical to the first time). The cache may have to go back further than
  // one token (a cut inside the recent window); the tokens in between run again. A cancel seen
  // meanwhile leaves the logits stale, but the decode loop checks for it before it samples.
  void restore() {
    std::vector<int32_t> ids(prompt_.ids.begin(), prompt_.ids.end());
    ids.insert(ids.end(), generated_.begin(), generated_.end());
    std::vector<chat::Role> roles(prompt_.roles.begin(), prompt_.roles.end());
    roles.resize(ids.size(), chat::Role::assistant);
    session_.truncate(static_cast<int64_t>(ids.size()) - 1);
    keel::prefill(model_.transformer(), session_.sequence(), ids, roles, options_.prefill_chunk, logits_,
                  options_.cancelled);
  }

  ServedModel& model_;
  SessionCache& session_;
  const PreparedPrompt& prompt_;
  const TurnOptions& options_;
  const std::function<void(TurnEvent&&)>& emit_;

  toolcall::OutputParserOptions parser_options_;
  std::unique_ptr<toolcall::OutputParser> parser_;
  text::StreamDecoder decoder_;
  StopMatcher stop_;
  Sampler sampler_;
  std::vector<float> logits_;

  std::vector<int32_t> generated_;   // this turn's tokens (after rewinds: the kept ones)
  std::string text_;                 // their decoded text
  std::vector<size_t> token_ends_;   // text_ offset where each token's text ends
  size_t parser_text_bytes_ = 0;     // text the parser has released and we have passed on
  size_t replayed_text_to_skip_ = 0;
  std::vector<int32_t> forced_;     // the budget's end-of-reasoning marker, still to be written
  int64_t produced_ = 0;            // tokens sampled or forced, retried ones included
  int64_t reasoning_generated_ = 0;  // sampled inside a reasoning block
  bool budget_closed_ = false;
  OutputEnd output_end_ = OutputEnd::EndOfSequence;
  int attempts_ = 0;
  bool no_more_retries_ = false;
  bool done_ = false;
  TurnResult result_;
};

}  // namespace

TurnResult run_turn(ServedModel& model, SessionCache& session, const PreparedPrompt& prompt,
                    const TurnOptions& options, const std::function<void(TurnEvent&&)>& emit) {
  if (prompt.ids.empty() || prompt.ids.size() != prompt.roles.size()) throw Error("run_turn: bad prompt");
  return TurnRunner(model, session, prompt, options, emit).run();
}

}  // namespace keel
