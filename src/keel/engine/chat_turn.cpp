#include "keel/engine/chat_turn.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>

#include "keel/engine/output_constraint.h"
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

}  // namespace

// The state of one turn (see Turn in chat_turn.h).
class TurnRunner {
  enum class Handled { Continue, Rewound };

 public:
  TurnRunner(ServedModel& model, SessionCache& session, const PreparedPrompt& prompt, const TurnOptions& options,
             std::function<void(TurnEvent&&)> emit, std::string affinity)
      : model_(model),
        session_(session),
        prompt_(prompt),
        options_(options),
        emit_(std::move(emit)),
        affinity_(std::move(affinity)),
        decoder_(model.tokenizer()),
        stop_(options.stop_sequences),
        sampler_(options.sampling),
        logits_(static_cast<size_t>(model.weights().spec.vocab_size)),
        constrainer_(make_output_constrainer(model, options.grammars, options.reasoning || prompt.starts_in_reasoning,
                                             !options.tools.is_null() && options.tool_use != ToolUse::Disabled)) {
    parser_options_.format = model.tool_call_format().format;
    parser_options_.reasoning = options.reasoning;
    parser_options_.starts_in_reasoning = prompt.starts_in_reasoning;
    parser_ = toolcall::make_output_parser(parser_options_);
  }

  ~TurnRunner() {
    if (seq_) session_.finish(std::move(seq_), affinity_);
  }

  void start() {
    if (done_) return;
    const int64_t n = static_cast<int64_t>(prompt_.ids.size());
    if (!begun_) {
      start_ = Clock::now();
      result_.stats.prompt_tokens = n;
      if (n >= session_.capacity())
        throw Error("the prompt (" + std::to_string(n) + " tokens) leaves no room in the context of " +
                    std::to_string(session_.capacity()) + " tokens");
    }
    // Everything that must be in the cache before the next sample: the prompt and the output kept
    // so far (after a rewind, or a sampled token not yet run).
    std::vector<int32_t> ids = run_ids();
    std::vector<chat::Role> roles = run_roles(ids.size());
    seq_ = session_.begin(ids, roles, options_.cache_salt, affinity_);
    set_pending(std::move(ids), std::move(roles), seq_->size());
    if (!begun_) {
      begun_ = true;
      result_.stats.reused_tokens = seq_->size();
      if (options_.on_reuse) options_.on_reuse(seq_->size());
    }
  }

  bool started() const { return seq_ != nullptr; }
  bool prefilled() const { return prefilled_; }
  void share_prompt() {
    if (seq_) seq_->publish();
  }
  bool done() const { return done_ && wrapped_; }
  int64_t pending_tokens() const { return static_cast<int64_t>(pending_ids_.size() - pending_at_); }
  int64_t sequence_size() const { return seq_ ? seq_->size() : 0; }

  std::optional<SequencePass> next_segment(int64_t max_tokens) {
    if (done_) return std::nullopt;
    if (!seq_) throw InternalError("turn: next_segment before start");
    if (cancelled()) {
      finish(TurnFinish::Cancelled);
      wrap_up();
      return std::nullopt;
    }
    if (max_tokens <= 0 || pending_tokens() == 0) throw InternalError("turn: nothing to run, or no room to run it");
    const auto len = static_cast<size_t>(std::min(max_tokens, pending_tokens()));
    in_flight_ = len;
    row_ = static_cast<int64_t>(len) - 1;
    const bool last = pending_at_ + len == pending_ids_.size();
    return SequencePass{seq_.get(), std::span<const int32_t>(pending_ids_).subspan(pending_at_, len),
                        std::span<const chat::Role>(pending_roles_).subspan(pending_at_, len),
                        last ? std::span<const int64_t>(&row_, 1) : std::span<const int64_t>(), logits_};
  }

  void after_pass() {
    if (!prefilled_) result_.stats.prefilled_tokens += static_cast<int64_t>(in_flight_);
    pending_at_ += in_flight_;
    in_flight_ = 0;
    if (pending_at_ < pending_ids_.size()) return;
    pending_ids_.clear();
    pending_roles_.clear();
    pending_at_ = 0;
    if (!prefilled_) {
      prefilled_ = true;
      // The next turn re-renders this prompt and diverges in the answer: keep what sliding-window
      // layers need to resume from here.
      seq_->keep_window_for_branch();
      result_.stats.prefill_seconds = seconds_since(start_);
      decode_start_ = Clock::now();
    }
    decode();
    if (done_) wrap_up();
  }

  void suspend() {
    if (!seq_ || done_) return;
    session_.suspend(std::move(seq_));
    pending_ids_.clear();
    pending_roles_.clear();
    pending_at_ = in_flight_ = 0;
  }

  TurnResult result() const { return result_; }

 private:
  // Why the output ended, for the reason a cut-off tool call is reported with.
  enum class OutputEnd { EndOfSequence, MaxTokens, ContextFull };

  std::vector<int32_t> run_ids() const {
    std::vector<int32_t> ids(prompt_.ids.begin(), prompt_.ids.end());
    ids.insert(ids.end(), generated_.begin(), generated_.end());
    return ids;
  }
  std::vector<chat::Role> run_roles(size_t n) const {
    std::vector<chat::Role> roles(prompt_.roles.begin(), prompt_.roles.end());
    roles.resize(n, chat::Role::assistant);
    return roles;
  }
  // What must run before the next sample: ids[from:].
  void set_pending(std::vector<int32_t> ids, std::vector<chat::Role> roles, int64_t from) {
    pending_ids_.assign(ids.begin() + from, ids.end());
    pending_roles_.assign(roles.begin() + from, roles.end());
    pending_at_ = in_flight_ = 0;
  }

  // The turn has ended: its numbers, and the sequence back to the session.
  void wrap_up() {
    if (wrapped_) return;
    wrapped_ = true;
    emit_settled_logprobs(true);
    if (!prefilled_) result_.stats.prefill_seconds = seconds_since(start_);
    result_.stats.decode_seconds = prefilled_ ? seconds_since(decode_start_) : 0.0;
    result_.stats.output_tokens = produced_;
    result_.stats.reasoning_tokens = reasoning_generated_;
    result_.stats.constrained_tokens = constrainer_.stats().constrained_tokens;
    result_.stats.mask_seconds = constrainer_.stats().mask_seconds;
    if (seq_) session_.finish(std::move(seq_), affinity_);
    if (result_.finish == TurnFinish::EndTurn && result_.stats.valid_calls > 0) result_.finish = TurnFinish::ToolUse;
  }

  OutputPosition position() const { return {text_, answer_start_, parser_->in_reasoning()}; }

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

  // The next token: the budget's end-of-reasoning marker or a call opener while it is being
  // written, else sampled. With logprobs asked for, a written token is reported with the model's
  // probability of it too (without the grammar, which does not apply to keel's own markup).
  int32_t next_token() {
    const bool forced = !forced_.empty();
    if (!forced || options_.top_logprobs) {
      // The processor stands for the model's own preferences (a bias, a test's script); the masks
      // come after it, so nothing it does brings back a token without text or one a grammar refuses.
      if (options_.logits_processor) options_.logits_processor(generated_, logits_);
      adjust_logits();
      mask_logits(logits_, model_.ids_without_token());
    }
    int32_t id = 0;
    if (forced) {
      id = forced_.front();
      forced_.erase(forced_.begin());
    } else {
      constrainer_.mask(logits_, position());
      id = sampler_.sample(logits_);
    }
    if (options_.top_logprobs) next_logprob_ = token_logprob(logits_, id, *options_.top_logprobs);
    return id;
  }

  // logit_bias and the penalties (TurnOptions). The counts are of the kept output: a rewind drops
  // those of the tokens it takes back (restore()).
  void adjust_logits() {
    for (const auto& [id, bias] : options_.logit_bias)
      if (static_cast<size_t>(id) < logits_.size()) logits_[static_cast<size_t>(id)] += bias;
    if (options_.presence_penalty != 0 || options_.frequency_penalty != 0) {
      for (const auto& [id, count] : written_)
        logits_[static_cast<size_t>(id)] -=
            options_.presence_penalty + options_.frequency_penalty * static_cast<float>(count);
    }
    if (options_.repetition_penalty != 1.0f) {
      auto repeat = [&](int32_t id) {
        float& l = logits_[static_cast<size_t>(id)];
        l = l > 0 ? l / options_.repetition_penalty : l * options_.repetition_penalty;
      };
      for (int32_t id : prompt_tokens()) repeat(id);
      for (const auto& [id, count] : written_)
        if (!std::binary_search(prompt_tokens_.begin(), prompt_tokens_.end(), id)) repeat(id);
    }
  }

  // The prompt's distinct ids, sorted (the repetition penalty's), computed on first use.
  const std::vector<int32_t>& prompt_tokens() {
    if (prompt_tokens_.empty()) {
      for (int32_t id : prompt_.ids)
        if (id >= 0 && static_cast<size_t>(id) < logits_.size()) prompt_tokens_.push_back(id);
      std::sort(prompt_tokens_.begin(), prompt_tokens_.end());
      prompt_tokens_.erase(std::unique(prompt_tokens_.begin(), prompt_tokens_.end()), prompt_tokens_.end());
    }
    return prompt_tokens_;
  }

  // Reports the logprobs of the output tokens no retry can take back any more: those the parser
  // has decided on (all of them once the output has ended).
  void emit_settled_logprobs(bool all) {
    if (!options_.top_logprobs) return;
    const size_t decided = all ? text_.size() : text_.size() - std::min(text_.size(), parser_->held_bytes());
    size_t settled = logprobs_sent_;
    while (settled < logprobs_.size() && (all || token_ends_[settled] <= decided)) ++settled;
    if (settled == logprobs_sent_) return;
    TurnEvent e{TurnEvent::Kind::Logprobs, {}, {}, {}, {}};
    const text::Tokenizer& tok = model_.tokenizer();
    for (size_t i = logprobs_sent_; i < settled; ++i) {
      TokenLogprob lp = logprobs_[i];
      lp.token.bytes = tok.token_bytes(lp.token.id);
      for (TokenChoice& c : lp.top) c.bytes = tok.token_bytes(c.id);
      e.logprobs.push_back(std::move(lp));
    }
    logprobs_sent_ = settled;
    emit_(std::move(e));
  }

  // A request that requires a call (tool_choice any / required, or a named tool) gets the format's
  // call opener written for the model where its answer begins (toolcall::call_opener): before any
  // text, after the reasoning block when the prompt opened one (else at once: the model does not
  // get to open one), and again where a retry rewinds to. The call is then parsed, checked and
  // retried like one the model opened itself.
  void open_required_call() {
    if (options_.tool_use != ToolUse::Required && options_.tool_use != ToolUse::Named) return;
    if (options_.tools.is_null() || result_.stats.valid_calls > 0 || !forced_.empty() || parser_->in_reasoning()) return;
    const std::string_view answer = std::string_view(text_).substr(std::min(answer_start_, text_.size()));
    if (answer.find_first_not_of(" \t\r\n") != std::string_view::npos) return;
    const std::string opener = toolcall::call_opener(parser_options_.format, options_.tool_name, answer_start_ > 0);
    if (!opener.empty()) forced_ = model_.tokenizer().encode(opener);
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

  // Samples and handles tokens until the next one needs a pass (or the turn ends). max_tokens
  // bounds every token sampled, retried ones included (produced_, not generated_), so tool-call
  // retries cannot make a turn cost more than the client allowed.
  void decode() {
    while (!done_) {
      if (!pending_ids_.empty()) return;  // a rewind's replay or the sampled token: their pass first
      if (cancelled()) return finish(TurnFinish::Cancelled);
      if (produced_ >= options_.max_tokens) break;
      enforce_reasoning_budget();
      open_required_call();
      const bool forced = !forced_.empty();
      const int32_t next = next_token();
      if (produced_++ == 0) result_.stats.first_token_seconds = seconds_since(start_);
      if (ends_output(next)) {
        end_of_output(TurnFinish::EndTurn, OutputEnd::EndOfSequence);  // done, or rewound
        continue;
      }
      generated_.push_back(next);
      if (options_.top_logprobs) logprobs_.push_back(std::move(next_logprob_));
      ++written_[next];
      const std::string piece = decoder_.feed(next);
      text_ += piece;
      token_ends_.push_back(text_.size());
      std::vector<toolcall::ParseEvent> events;
      const bool was_reasoning = parser_->in_reasoning();
      parser_->feed(piece, events);
      // Tokens inside the block count, not the markers that open or close it.
      if (!forced && was_reasoning && parser_->in_reasoning()) ++reasoning_generated_;
      if (was_reasoning || parser_->in_reasoning()) answer_start_ = text_.size();
      constrainer_.wrote(next, position());
      if (handle(events) == Handled::Rewound) continue;
      emit_settled_logprobs(false);
      if (done_) return;
      if (produced_ >= options_.max_tokens) break;
      if (seq_->size() >= session_.capacity()) {
        end_of_output(TurnFinish::ContextFull, OutputEnd::ContextFull);
        return;
      }
      set_pending({next}, {chat::Role::assistant}, 0);
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
          if (!e.text.empty()) emit_(TurnEvent{TurnEvent::Kind::Reasoning, std::move(e.text), {}, {}, {}});
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
    if (!text.empty()) emit_(TurnEvent{TurnEvent::Kind::Text, text, {}, {}, {}});
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
      emit_(TurnEvent{TurnEvent::Kind::ToolCall, {}, std::move(checked.name), std::move(checked.arguments), {}});
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
    if (options_.top_logprobs) logprobs_.resize(keep);
    written_.clear();
    for (int32_t id : generated_) ++written_[id];
    text_.resize(keep == 0 ? 0 : token_ends_.back());
    decoder_.flush();
    for (int32_t id : generated_) decoder_.feed(id);

    // A fresh parser and constrainer replay the kept tokens; what the parser releases was sent already.
    parser_ = toolcall::make_output_parser(parser_options_);
    constrainer_ = make_output_constrainer(model_, options_.grammars, options_.reasoning || prompt_.starts_in_reasoning,
                                           !options_.tools.is_null() && options_.tool_use != ToolUse::Disabled);
    std::vector<toolcall::ParseEvent> replay;
    answer_start_ = 0;
    for (size_t i = 0; i < generated_.size(); ++i) {
      const size_t begin = i == 0 ? 0 : token_ends_[i - 1];
      const bool was_reasoning = parser_->in_reasoning();
      parser_->feed(std::string_view(text_).substr(begin, token_ends_[i] - begin), replay);
      if (was_reasoning || parser_->in_reasoning()) answer_start_ = token_ends_[i];
      constrainer_.wrote(generated_[i], {std::string_view(text_).substr(0, token_ends_[i]), answer_start_, parser_->in_reasoning()});
    }
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
  // recomputed (bit-identical to the first time): the cache may have to go back further than one
  // token (a cut inside the recent window), and the tokens in between run again.
  void restore() {
    std::vector<int32_t> ids = run_ids();
    std::vector<chat::Role> roles = run_roles(ids.size());
    const int64_t kept = seq_->trim(static_cast<int64_t>(ids.size()) - 1);
    set_pending(std::move(ids), std::move(roles), kept);
  }

  ServedModel& model_;
  SessionCache& session_;
  const PreparedPrompt& prompt_;
  const TurnOptions& options_;
  const std::function<void(TurnEvent&&)> emit_;
  const std::string affinity_;

  std::unique_ptr<kv::KvSequence> seq_;  // while started: checked out of the session
  std::vector<int32_t> pending_ids_;     // what must run before the next sample
  std::vector<chat::Role> pending_roles_;
  size_t pending_at_ = 0;                // of pending_ids_, already run
  size_t in_flight_ = 0;                 // handed out by next_segment, not yet run
  int64_t row_ = 0;                      // the segment's logits row
  bool begun_ = false;                   // start() ran once
  bool prefilled_ = false;               // the prompt has run
  bool wrapped_ = false;                 // the result is final and the sequence handed back
  Clock::time_point start_, decode_start_;

  toolcall::OutputParserOptions parser_options_;
  std::unique_ptr<toolcall::OutputParser> parser_;
  text::StreamDecoder decoder_;
  StopMatcher stop_;
  Sampler sampler_;
  std::vector<float> logits_;
  OutputConstrainer constrainer_;

  std::vector<int32_t> generated_;   // this turn's tokens (after rewinds: the kept ones)
  std::map<int32_t, int64_t> written_;  // how often each of them occurs, for the penalties
  std::vector<int32_t> prompt_tokens_;  // the prompt's distinct ids (prompt_tokens())
  TokenLogprob next_logprob_;          // of the token next_token() just returned
  std::vector<TokenLogprob> logprobs_;  // of generated_, when asked for
  size_t logprobs_sent_ = 0;            // of them, reported (settled: never taken back)
  std::string text_;                 // their decoded text
  std::vector<size_t> token_ends_;   // text_ offset where each token's text ends
  size_t parser_text_bytes_ = 0;     // text the parser has released and we have passed on
  size_t replayed_text_to_skip_ = 0;
  std::vector<int32_t> forced_;     // a budget's end-of-reasoning marker or a call opener, still to be written
  size_t answer_start_ = 0;         // text_ offset where the answer begins (after reasoning)
  int64_t produced_ = 0;            // tokens sampled or forced, retried ones included
  int64_t reasoning_generated_ = 0;  // sampled inside a reasoning block
  bool budget_closed_ = false;
  OutputEnd output_end_ = OutputEnd::EndOfSequence;
  int attempts_ = 0;
  bool no_more_retries_ = false;
  bool done_ = false;
  TurnResult result_;
};

Turn::Turn(ServedModel& model, SessionCache& session, const PreparedPrompt& prompt, const TurnOptions& options,
           std::function<void(TurnEvent&&)> emit, std::string affinity) {
  if (prompt.ids.empty() || prompt.ids.size() != prompt.roles.size()) throw Error("turn: bad prompt");
  runner_ = std::make_unique<TurnRunner>(model, session, prompt, options, std::move(emit), std::move(affinity));
}

Turn::~Turn() = default;
void Turn::start() { runner_->start(); }
bool Turn::started() const { return runner_->started(); }
bool Turn::done() const { return runner_->done(); }
bool Turn::prefilled() const { return runner_->prefilled(); }
void Turn::share_prompt() { runner_->share_prompt(); }
std::optional<SequencePass> Turn::next_segment(int64_t max_tokens) { return runner_->next_segment(max_tokens); }
int64_t Turn::pending_tokens() const { return runner_->pending_tokens(); }
void Turn::after_pass() { runner_->after_pass(); }
void Turn::suspend() { runner_->suspend(); }
int64_t Turn::sequence_size() const { return runner_->sequence_size(); }
TurnResult Turn::result() const { return runner_->result(); }

TurnResult run_turn(ServedModel& model, SessionCache& session, const PreparedPrompt& prompt,
                    const TurnOptions& options, const std::function<void(TurnEvent&&)>& emit,
                    const std::string& affinity) {
  if (options.prefill_chunk <= 0) throw Error("prefill chunk must be positive");
  Turn turn(model, session, prompt, options, emit, affinity);
  turn.start();
  while (!turn.done()) {
    const std::optional<SequencePass> segment = turn.next_segment(options.prefill_chunk);
    if (!segment) break;
    run_pass(model.transformer(), std::span(&*segment, 1));
    turn.after_pass();
  }
  return turn.result();
}

}  // namespace keel
