// The chat routes: parse the request, render and tokenize it on the HTTP thread, queue the turn to
// the engine thread, and answer with a JSON body or an SSE stream fed by the turn's events.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <random>

#include "keel/api/chat_result.h"
#include "keel/api/kv_routes.h"
#include "keel/api/log_text.h"
#include "keel/api/request_json.h"
#include "keel/api/responses_response.h"
#include "keel/api/server_state.h"
#include "keel/api/sse_writer.h"
#include "keel/engine/chat_turn.h"
#include "keel/engine/output_constraint.h"
#include "keel/engine/scheduler.h"
#include "keel/engine/sampler.h"
#include "keel/engine/served_model.h"
#include "keel/util/error.h"

namespace keel::api {
namespace {

using Clock = std::chrono::steady_clock;

// One queued turn, shared by the HTTP thread that answers it and the engine thread that runs it.
struct Job {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<TurnEvent> events;
  std::optional<int64_t> reused_tokens;  // known once the engine has started the turn
  bool finished = false;
  TurnResult result;
  std::optional<ApiError> error;
  std::atomic<bool> cancelled{false};
};

// How often a waiting HTTP thread looks at its connection: a client that left is noticed within
// this, and the engine stops before its next prefill chunk or decode step.
constexpr std::chrono::milliseconds kProbeInterval{50};

// Whether a job's answer is no longer wanted: its client has closed the connection
// (http::Request::client_gone), or the server is shutting down and the grace period is over.
using Abandoned = std::function<bool()>;

Abandoned abandoned_when(const http::Request& req, const ServerState& s) {
  return [client_gone = req.client_gone, &s] { return client_gone() || s.past_grace(); };
}

// The answer of a turn that never ran or was cut short because the server is stopping.
// Retry-After as for an overload: a supervisor restarting keel is back within seconds, and a client
// that honours the header waits instead of failing the turn.
ApiError shutting_down() {
  ApiError e(503, "api_error", "the server is shutting down; retry on its next start");
  e.retry_after_seconds = kOverloadedRetryAfterSeconds;
  return e;
}

// Waits until `ready` holds (under job->mutex) or `timeout` passes, and cancels the job as soon as
// its answer is abandoned. Returns ready().
template <typename Ready>
bool wait_on_job(Job& job, std::unique_lock<std::mutex>& lock, const Abandoned& abandoned,
                 std::chrono::milliseconds timeout, Ready ready) {
  const auto deadline = Clock::now() + timeout;
  while (!ready()) {
    if (abandoned()) job.cancelled = true;
    const auto now = Clock::now();
    if (now >= deadline) return false;
    job.changed.wait_for(lock, std::min<Clock::duration>(kProbeInterval, deadline - now), ready);
  }
  return true;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

ChatRequest parse_request(Protocol protocol, const std::string& body, const RequestLimits& limits) {
  switch (protocol) {
    case Protocol::Anthropic: return parse_anthropic_request(body, limits);
    case Protocol::OpenAI: return parse_openai_request(body, limits);
    case Protocol::Responses: return parse_responses_request(body, limits);
  }
  throw internal_error("unknown protocol");
}

const char* route_of(Protocol protocol) {
  switch (protocol) {
    case Protocol::Anthropic: return "/v1/messages";
    case Protocol::OpenAI: return "/v1/chat/completions";
    case Protocol::Responses: return "/v1/responses";
  }
  return "";
}

// One result per choice: only OpenAI requests have more than one (n).
std::string response_body(const std::vector<ChatResult>& out, const ChatRequest& r) {
  switch (r.protocol) {
    case Protocol::Anthropic: return anthropic_response_body(out.front());
    case Protocol::OpenAI: return openai_response_body(out, unix_now());
    case Protocol::Responses: return responses_response_body(out.front(), responses_settings(r), unix_now());
  }
  return {};
}

PreparedPrompt prepare_prompt(const ServedModel& model, const ChatRequest& r) {
  try {
    return model.prepare(r.messages, r.tools, PromptControls{r.thinking, r.reasoning_effort, r.assistant_prefill});
  } catch (const ApiError&) {
    throw;  // already says whose fault it is, as do the next two
  } catch (const CapacityError&) {
    throw;
  } catch (const InternalError&) {
    throw;
  } catch (const Error& e) {
    // The template raised (roles out of order, a feature it does not support) or the tokenizer
    // refused the text: the request is what is wrong.
    throw invalid_request(std::string("the model's chat template cannot render this conversation: ") + e.what());
  }
}

ToolUse tool_use_of(ToolChoiceMode mode) {
  switch (mode) {
    case ToolChoiceMode::Auto: return ToolUse::Auto;
    case ToolChoiceMode::Any: return ToolUse::Required;
    case ToolChoiceMode::Tool: return ToolUse::Named;
    case ToolChoiceMode::None: return ToolUse::Disabled;
  }
  return ToolUse::Auto;
}

// The grammars a request's output follows: its structured-output schema, and its tools' schemas
// in the model's call format for the tools that are constrained (the tool's strict flag, else the
// server's default). Null when nothing is constrained.
std::shared_ptr<const OutputGrammars> output_grammars(const ChatRequest& r, ServerState& s) {
  std::shared_ptr<const OutputGrammars> calls;
  if (r.tools.is_array() && r.tool_choice != ToolChoiceMode::None)
    calls = s.call_grammars.get(s.model.tool_call_format().format, r.tools, r.tool_strict, s.options.constrained_tool_calls);
  if (!r.answer_grammar) return calls;
  auto grammars = std::make_shared<OutputGrammars>(calls ? *calls : OutputGrammars{});
  grammars->answer = r.answer_grammar;
  return grammars;
}

TurnOptions turn_options(const ChatRequest& r, ServerState& s) {
  TurnOptions o;
  o.max_tokens = r.max_tokens;
  o.sampling.temperature = r.temperature;
  o.sampling.top_p = r.top_p;
  o.sampling.top_k = r.top_k;
  o.sampling.seed = r.seed ? *r.seed : std::random_device{}();
  o.stop_sequences = r.stop_sequences;
  o.tools = r.tools;
  o.tool_use = tool_use_of(r.tool_choice);
  o.tool_name = r.tool_choice_name;
  o.parallel_tool_calls = r.parallel_tool_calls;
  o.tool_retries = s.options.tool_retries;
  o.grammars = output_grammars(r, s);
  o.presence_penalty = r.presence_penalty;
  o.frequency_penalty = r.frequency_penalty;
  const auto rows = s.model.weights().spec.vocab_size;
  for (const auto& [id, bias] : r.logit_bias)
    if (id >= rows)
      reject_field("logit_bias." + std::to_string(id),
                   "the model has no token " + std::to_string(id) + " (its ids go up to " + std::to_string(rows - 1) + ")");
  o.logit_bias = r.logit_bias;
  o.repetition_penalty = r.repetition_penalty;
  o.top_logprobs = r.top_logprobs;
  o.reasoning = s.model.reasoning().kind != toolcall::ReasoningKind::None;
  // Thinking off: a switchable template is rendered with enable_thinking false (ServedModel::prepare);
  // a model that always reasons gets a budget of 0, so its block is closed at once.
  if (r.thinking) o.reasoning_budget = r.reasoning_budget;
  else if (s.model.reasoning().kind == toolcall::ReasoningKind::AlwaysOn) o.reasoning_budget = 0;
  return o;
}

// The parsers' ranges are meant to be the sampler's (top_p 0 is greedy in both); should they ever
// differ, the sampler's refusal is still the client's 400 before the request waits in the queue,
// never a failed generation (500) after it.
void check_sampling(const SamplingParams& sampling) {
  try {
    [[maybe_unused]] const Sampler check(sampling);
  } catch (const Error& e) {
    throw invalid_request(e.what());
  }
}

FinishReason finish_reason_of(TurnFinish finish) {
  switch (finish) {
    case TurnFinish::MaxTokens:
    case TurnFinish::ContextFull: return FinishReason::MaxTokens;
    case TurnFinish::StopSequence: return FinishReason::StopSequence;
    case TurnFinish::ToolUse: return FinishReason::ToolUse;
    case TurnFinish::EndTurn:
    case TurnFinish::Cancelled: return FinishReason::EndTurn;
  }
  return FinishReason::EndTurn;
}

Usage usage_of(const TurnStats& st) {
  Usage u;
  u.cache_read_input_tokens = st.reused_tokens;
  u.input_tokens = st.prompt_tokens - st.reused_tokens;
  u.output_tokens = st.output_tokens;
  u.reasoning_tokens = st.reasoning_tokens;
  return u;
}

// The engine-thread half: the turn as the scheduler runs it, each event handed to the waiting HTTP
// thread, and the result (or the error) stored, counted and logged when it ends.
TurnJob turn_job(ServerState& s, std::shared_ptr<Job> job, std::shared_ptr<const PreparedPrompt> prompt,
                 TurnOptions options, std::string label, std::string affinity) {
  TurnJob t;
  t.prompt = prompt;
  options.cancelled = &job->cancelled;
  options.on_reuse = [job](int64_t reused) {
    std::lock_guard lock(job->mutex);
    job->reused_tokens = reused;
    job->changed.notify_all();
  };
  t.options = std::move(options);
  t.affinity = std::move(affinity);
  t.emit = [job](TurnEvent&& e) {
    std::lock_guard lock(job->mutex);
    job->events.push_back(std::move(e));
    job->changed.notify_all();
  };
  // Queued before a shutdown signal, or its client left while it waited: it does not start.
  t.runnable = [&s, job] { return !s.shutting_down && !job->cancelled; };
  const auto start = Clock::now();
  t.done = [&s, job, label = std::move(label), start](TurnResult result, std::exception_ptr failure) {
    std::optional<ApiError> error;
    if (failure) {
      try {
        std::rethrow_exception(failure);
      } catch (const std::exception& e) {
        // The request was accepted, so a plain keel::Error here is keel's failure, not the
        // client's; a CapacityError (the KV pool is full of live sequences) is overloaded: retry later.
        error = to_api_error(e, PlainError::ServerFault);
        if (error->status == 500) error = internal_error(std::string("generation failed: ") + e.what());
      }
    } else if (result.finish == TurnFinish::Cancelled && (s.past_grace() || (s.shutting_down && !job->cancelled))) {
      error = shutting_down();
    }
    s.kv_tokens = s.session.live_tokens();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const auto& st = result.stats;
    s.metrics.count_turn({st.prompt_tokens, st.reused_tokens, st.output_tokens, st.valid_calls, st.invalid_calls,
                          st.retries, st.first_token_seconds, seconds});
    std::fprintf(stderr, "keel serve: %s -> %s: %lld prompt tokens (%lld cached), %lld out, %lld calls%s, %.2f s%s%s\n",
                 label.c_str(), s.model.dir().string().c_str(), static_cast<long long>(st.prompt_tokens),
                 static_cast<long long>(st.reused_tokens), static_cast<long long>(st.output_tokens),
                 static_cast<long long>(st.valid_calls),
                 st.invalid_calls ? (", " + std::to_string(st.invalid_calls) + " invalid").c_str() : "", seconds,
                 result.finish == TurnFinish::Cancelled && !error
                     ? (", cancelled (client gone) after " + std::to_string(st.reused_tokens + st.prefilled_tokens) +
                        " of " + std::to_string(st.prompt_tokens) + " prompt tokens")
                           .c_str()
                     : "",
                 error ? (", error: " + log_safe(error->what(), 500)).c_str() : "");
    std::lock_guard lock(job->mutex);
    job->result = std::move(result);
    job->error = std::move(error);
    job->finished = true;
    job->changed.notify_all();
  };
  return t;
}

// Non-streaming answers collect the events into content blocks.
void append_block(std::vector<OutputBlock>& blocks, TurnEvent&& e, Protocol protocol) {
  using Kind = OutputBlock::Kind;
  switch (e.kind) {
    case TurnEvent::Kind::Text:
    case TurnEvent::Kind::Reasoning: {
      const Kind kind = e.kind == TurnEvent::Kind::Text ? Kind::Text : Kind::Thinking;
      if (!blocks.empty() && blocks.back().kind == kind) {
        blocks.back().text += e.text;
      } else {
        blocks.push_back(OutputBlock{kind, std::move(e.text), {}, {}, {}});
      }
      break;
    }
    case TurnEvent::Kind::ToolCall:
      blocks.push_back(OutputBlock{Kind::ToolUse, {}, new_tool_call_id(protocol), std::move(e.name), std::move(e.arguments)});
      break;
    case TurnEvent::Kind::Logprobs:
      break;  // collect_result keeps them
  }
}

// Anthropic answers carry no whitespace-only text block in front of a tool call; trim what the
// model wrote around its calls the way the reference servers do.
void tidy_blocks(std::vector<OutputBlock>& blocks) {
  std::vector<OutputBlock> kept;
  for (auto& b : blocks) {
    if (b.kind != OutputBlock::Kind::ToolUse && b.text.find_first_not_of(" \t\r\n") == std::string::npos) continue;
    kept.push_back(std::move(b));
  }
  blocks = std::move(kept);
}

// One choice's answer, collected from its job's events as they come.
ChatResult collect_result(const std::shared_ptr<Job>& job, Protocol protocol, const ChatRequest& r,
                          const Abandoned& abandoned) {
  ChatResult out;
  out.id = new_message_id(protocol);
  out.model = r.model;
  std::vector<TokenLogprob> logprobs;
  {
    std::unique_lock lock(job->mutex);
    while (true) {
      wait_on_job(*job, lock, abandoned, std::chrono::hours(24), [&] { return job->finished || !job->events.empty(); });
      while (!job->events.empty()) {
        TurnEvent& e = job->events.front();
        if (e.kind == TurnEvent::Kind::Logprobs) std::move(e.logprobs.begin(), e.logprobs.end(), std::back_inserter(logprobs));
        else append_block(out.blocks, std::move(e), protocol);
        job->events.pop_front();
      }
      if (job->finished) break;
    }
    if (job->error) throw *job->error;
    out.finish = finish_reason_of(job->result.finish);
    out.stop_sequence = job->result.stop_sequence;
    out.usage = usage_of(job->result.stats);
  }
  tidy_blocks(out.blocks);
  if (r.top_logprobs) out.logprobs = {{"content", openai_logprob_entries(logprobs)}, {"refusal", nullptr}};
  return out;
}

void answer_whole(ServerState& s, Protocol protocol, const ChatRequest& r, const std::vector<std::shared_ptr<Job>>& jobs,
                  const Abandoned& abandoned, http::Response& res) {
  std::vector<ChatResult> choices;
  // Every choice's turn watches the first job's flag (handle_chat).
  const Abandoned cancel_all = [&] {
    const bool gone = abandoned();
    if (gone) jobs.front()->cancelled = true;
    return gone;
  };
  for (const auto& job : jobs) choices.push_back(collect_result(job, protocol, r, cancel_all));
  res.status = 200;
  res.set_content(response_body(choices, r), "application/json");
  s.metrics.count_response(route_of(protocol), 200);
}

// The streaming side: one step per wake-up; pings keep the connection alive while the
// request waits in the queue or the model is inside a tool call. A failed write means the client
// is gone: the job is cancelled and the engine stops at its next step.
struct StreamState {
  std::shared_ptr<Job> job;
  std::unique_ptr<StreamWriter> writer;
  std::string id, model;
  Usage usage_at_start;
  Protocol protocol;
  bool started = false;
  bool text_open = false;  // a text block has non-whitespace content (leading blank text is held)
  std::string held_blank;  // whitespace-only text not yet sent
  std::chrono::milliseconds ping_interval;
  Abandoned abandoned;
};

bool write_or_cancel(StreamState& st, http::ChunkSink& sink, const std::string& data) {
  if (data.empty()) return true;
  if (sink.write(data)) return true;
  st.job->cancelled = true;
  return false;
}

std::string stream_event(StreamState& st, TurnEvent&& e) {
  switch (e.kind) {
    case TurnEvent::Kind::Text: {
      // Whitespace before a tool call or at the very start would open an empty-looking block.
      if (!st.text_open && e.text.find_first_not_of(" \t\r\n") == std::string::npos) {
        st.held_blank += e.text;
        return {};
      }
      std::string out = st.writer->text(st.held_blank + e.text);
      st.held_blank.clear();
      st.text_open = true;
      return out;
    }
    case TurnEvent::Kind::Reasoning:
      st.text_open = false;
      st.held_blank.clear();
      return st.writer->thinking(e.text);
    case TurnEvent::Kind::ToolCall:
      st.text_open = false;
      st.held_blank.clear();
      return st.writer->tool_use(new_tool_call_id(st.protocol), e.name, e.arguments);
    case TurnEvent::Kind::Logprobs:
      return st.writer->logprobs(openai_logprob_entries(e.logprobs));
  }
  return {};
}

// message_start carries the usage known so far: the split between cached and prefilled prompt
// tokens once the engine has started the turn; if the request is still queued after one ping
// interval, the whole prompt as input (message_delta has the final numbers either way).
void start_stream(StreamState& st, http::ChunkSink& sink) {
  Usage usage = st.usage_at_start;
  {
    std::unique_lock lock(st.job->mutex);
    wait_on_job(*st.job, lock, st.abandoned, st.ping_interval,
                [&] { return st.job->finished || st.job->reused_tokens.has_value(); });
    if (st.job->reused_tokens) {
      usage.cache_read_input_tokens = *st.job->reused_tokens;
      usage.input_tokens -= *st.job->reused_tokens;
    }
  }
  write_or_cancel(st, sink, st.writer->start(st.id, st.model, usage));
}

// One wake-up's events; false once the stream is complete or the client is gone.
bool stream_step(StreamState& st, http::ChunkSink& sink) {
  if (!st.started) {
    st.started = true;
    start_stream(st, sink);
    if (st.job->cancelled) return false;
  }
  std::deque<TurnEvent> events;
  std::optional<int64_t> reused_tokens;  // known once the engine has started the turn
  bool finished = false;
  TurnResult result;
  std::optional<ApiError> error;
  {
    std::unique_lock lock(st.job->mutex);
    wait_on_job(*st.job, lock, st.abandoned, st.ping_interval,
                [&] { return st.job->finished || !st.job->events.empty(); });
    events.swap(st.job->events);
    finished = st.job->finished;
    if (finished) {
      result = st.job->result;
      error = st.job->error;
    }
  }
  if (events.empty() && !finished) return write_or_cancel(st, sink, st.writer->ping());
  std::string out;
  for (auto& e : events) out += stream_event(st, std::move(e));
  if (finished) {
    out += error ? st.writer->error(*error)
                 : st.writer->finish(finish_reason_of(result.finish), result.stop_sequence, usage_of(result.stats));
  }
  return write_or_cancel(st, sink, out) && !finished;
}

// The prompt's length is known before anything is queued or streamed, so a prompt that leaves no
// room to generate is a client error (Claude Code compacts its conversation on this wording), and
// max_tokens is clamped to the room left: the turn then ends with max_tokens when the context is full.
void fit_to_context(ChatRequest& r, int64_t prompt_tokens, int64_t context_tokens) {
  if (prompt_tokens >= context_tokens) throw prompt_too_long(prompt_tokens, context_tokens);
  r.max_tokens = std::min(r.max_tokens, context_tokens - prompt_tokens);
}

// How long a request waits for its share of the preparation budget before it is answered
// "overloaded": long enough for a few of the largest bodies ahead of it to be tokenized.
constexpr std::chrono::seconds kPreparationWait{30};

// Which live KV sequence the turn continues and stays under (SessionCache): the agent Claude Code
// names in x-claude-code-agent-id (its main loop and each subagent have their own), else the
// request's user field.
std::string affinity_of(const http::Request& req, const ChatRequest& r) {
  std::string agent = req.header("x-claude-code-agent-id");
  if (!agent.empty()) return "agent:" + agent;
  return r.user.empty() ? std::string() : "user:" + r.user;
}

// A share of the preparation budget for this request's body (PreparationGate), or 529.
PreparationGate::Ticket admit_preparation(ServerState& s, const http::Request& req) {
  auto ticket = s.preparation.enter(req.body.size(), kPreparationWait);
  if (!ticket)
    throw overloaded("the server is busy preparing other large requests (" +
                     std::to_string(s.preparation.budget_bytes() >> 20) + " MiB of preparation memory in use); retry shortly");
  return std::move(*ticket);
}

struct PreparedRequest {
  ChatRequest request;  // without its messages: they are rendered into the prompt
  std::shared_ptr<const PreparedPrompt> prompt;
};

// Parses, resolves the name, renders and tokenizes: everything that costs a multiple of the body,
// under a share of the preparation budget. The ticket is the first thing taken and the last
// released, so what the preparation allocated is freed, on success and on error alike, before the
// share goes back (and the heap is trimmed).
PreparedRequest prepare_request(ServerState& s, Protocol protocol, const http::Request& req) {
  const PreparationGate::Ticket ticket = admit_preparation(s, req);
  ChatRequest r = parse_request(protocol, req.body, s.options.limits);
  s.registry.require(r.model);
  auto prompt = std::make_shared<const PreparedPrompt>(prepare_prompt(s.model, r));
  fit_to_context(r, static_cast<int64_t>(prompt->ids.size()), s.session.capacity());
  r.messages = nlohmann::ordered_json();
  return {std::move(r), std::move(prompt)};
}

}  // namespace

void handle_chat(ServerState& s, Protocol protocol, const http::Request& req, http::Response& res,
                 uint64_t cache_salt) {
  const char* route = route_of(protocol);
  try {
    auto [r, prompt] = prepare_request(s, protocol, req);
    // The model name is the client's: log_safe keeps it on this line.
    const std::string label =
        std::string("POST ") + route + " model \"" + log_safe(r.model) + "\"" + (r.stream ? " stream" : "");
    TurnOptions options = turn_options(r, s);
    options.cache_salt = cache_salt;
    check_sampling(options.sampling);
    const std::string affinity = affinity_of(req, r);
    // Choice i samples with seed + i. The first choice leads: the others follow once its prompt
    // has run, reusing its blocks (TurnJob::followers), and share its cancellation.
    std::vector<std::shared_ptr<Job>> jobs;
    for (int i = 0; i < r.n; ++i) jobs.push_back(std::make_shared<Job>());
    TurnJob leader = turn_job(s, jobs[0], prompt, options, label, affinity);
    for (int i = 1; i < r.n; ++i) {
      TurnOptions choice = options;
      choice.sampling.seed += static_cast<uint64_t>(i);
      TurnJob follower = turn_job(s, jobs[static_cast<size_t>(i)], prompt, std::move(choice), label, affinity);
      follower.options.cancelled = &jobs[0]->cancelled;
      follower.runnable = [&s, lead = jobs[0]] { return !s.shutting_down && !lead->cancelled; };
      leader.followers.push_back(std::move(follower));
    }
    auto job = jobs[0];
    if (!s.scheduler.submit(std::move(leader)))
      throw overloaded("the server is busy: " + std::to_string(s.scheduler.max_waiting()) +
                       " requests are already waiting; retry shortly");
    if (!r.stream) return answer_whole(s, protocol, r, jobs, abandoned_when(req, s), res);

    auto st = std::make_shared<StreamState>();
    st->job = job;
    st->writer = make_stream_writer(r, unix_now());
    st->id = new_message_id(protocol);
    st->model = r.model;
    st->usage_at_start.input_tokens = static_cast<int64_t>(prompt->ids.size());
    st->protocol = protocol;
    st->ping_interval = s.options.ping_interval;
    st->abandoned = abandoned_when(req, s);
    res.status = 200;
    res.set_header("Content-Type", "text/event-stream");
    res.set_header("Cache-Control", "no-cache");
    res.stream = [st](http::ChunkSink& sink) {
      try {
        while (stream_step(*st, sink)) {
        }
      } catch (...) {
        st->job->cancelled = true;  // nobody will read the rest
        throw;
      }
    };
    s.metrics.count_response(route, 200);
  } catch (const std::exception& e) {
    // Everything here runs before the request is queued (a failed turn arrives as its ApiError),
    // so a plain keel::Error is about the request; the typed ones say otherwise.
    send_error(res, protocol, to_api_error(e, PlainError::BadRequest));
    s.metrics.count_response(route, res.status);
  }
}

void handle_count_tokens(ServerState& s, const http::Request& req, http::Response& res) {
  try {
    const size_t tokens = [&] {
      const PreparationGate::Ticket ticket = admit_preparation(s, req);  // released last, as in prepare_request
      ChatRequest r = parse_anthropic_count_tokens_request(req.body, s.options.limits);
      s.registry.require(r.model);
      return prepare_prompt(s.model, r).ids.size();
    }();
    res.set_content(nlohmann::ordered_json{{"input_tokens", tokens}}.dump(), "application/json");
    s.metrics.count_response("/v1/messages/count_tokens", 200);
  } catch (const std::exception& e) {
    send_error(res, Protocol::Anthropic, to_api_error(e, PlainError::BadRequest));
    s.metrics.count_response("/v1/messages/count_tokens", res.status);
  }
}

void handle_kv_prefix(ServerState& s, Protocol protocol, const http::Request& req, http::Response& res,
                      uint64_t cache_salt) {
  try {
    const nlohmann::ordered_json body = [&] {
      const PreparationGate::Ticket ticket = admit_preparation(s, req);  // released last, as in prepare_request
      ChatRequest r = parse_request(protocol, req.body, s.options.limits);
      s.registry.require(r.model);
      return kv_prefix_json(s.session.pool(), s.instance, prepare_prompt(s.model, r), cache_salt);
    }();
    res.set_content(body.dump(), "application/json");
  } catch (const std::exception& e) {
    send_error(res, protocol, to_api_error(e, PlainError::BadRequest));
  }
  s.metrics.count_response("/kv/prefix", res.status);
}

}  // namespace keel::api
