#pragma once
// What the HTTP handlers share (internal to server.cpp and chat_endpoint.cpp).
//
// Threads: every HTTP worker (keel/http's handler threads) and the one engine thread (the
// Scheduler's, running every turn) hold the same ServerState&. Nothing here is locked
// as a whole; each member says who may touch it and why that is safe. The engine thread is the
// only one that runs the model or changes KV state; HTTP threads only read what is immutable after
// start or locked by its owner.
#include <atomic>
#include <chrono>
#include <string>
#include <utility>

#include "keel/api/chat_result.h"
#include "keel/api/metrics.h"
#include "keel/api/model_registry.h"
#include "keel/api/preparation_gate.h"
#include "keel/api/server.h"
#include "keel/api/warmup.h"
#include "keel/engine/output_constraint.h"
#include "keel/engine/scheduler.h"
#include "keel/engine/served_model.h"
#include "keel/http/http_server.h"

namespace keel::api {

struct ServerState {
  ServerState(ServedModel& served, SessionCache& sessions, ServerOptions opts, SchedulerOptions scheduling)
      : model(served),
        session(sessions),
        options(std::move(opts)),
        registry(served.name(), options.aliases),
        preparation(options.preparation_budget_bytes, options.max_body_bytes),
        scheduler(served, sessions, scheduling) {}

  // HTTP threads call only its const members, which read what loading fixed: prepare() (template
  // rendering and tokenizing, many threads at once), tokenizer(), tool_call_format(), reasoning(),
  // dir(), weights() sizes. The engine thread alone calls transformer(): a forward pass owns the
  // activation buffers and the thread pool.
  ServedModel& model;
  // The engine thread alone changes it (the scheduler's turns check sequences out and back).
  // HTTP threads may call stats() (the pool takes its lock), and policy(), rotate() and
  // capacity(), which never change after construction; never live_tokens() or live_count().
  SessionCache& session;
  const ServerOptions options;  // read by every thread, written by none
  const ModelRegistry registry;  // likewise
  Metrics metrics;                // thread-safe (its own mutex): the engine counts turns, HTTP threads responses
  PreparationGate preparation;    // thread-safe: HTTP threads hold a share while they prepare a request
  // The tokens the live sequences hold after the last turn: written by the engine thread at the
  // end of each turn, read by /health and /metrics, which may not ask the session themselves.
  std::atomic<int64_t> kv_tokens{0};
  // Server::shutdown(): set once, from the signal thread; read by every thread. A turn that starts
  // after it does not run (503); one still running at grace_ends is cancelled.
  using Clock = std::chrono::steady_clock;
  std::atomic<Clock::time_point> grace_ends{Clock::time_point::max()};
  std::atomic<bool> shutting_down{false};
  CallGrammarCache call_grammars;  // thread-safe: HTTP threads build and share tool sets' grammars
  // --warm: how far the warm-up is (atomics: the engine thread counts, /health reads).
  WarmupStatus warmup;
  // Names this process to a router following /kv/events (kv_routes.h): random, fixed at start.
  const std::string instance = new_item_id("keel_");
  bool past_grace() const { return shutting_down && Clock::now() >= grace_ends.load(); }

  // Thread-safe: HTTP threads submit and read stats; its thread runs the turns, whose callbacks
  // use every member above. Last, so it is built after them and stopped before any of them goes.
  Scheduler scheduler;
};

// Answers `error` in `protocol`'s envelope, with its Retry-After header when it has one. Any HTTP
// thread, on the response it is writing.
void send_error(http::Response& res, Protocol protocol, const ApiError& error);

// POST /v1/messages, /v1/chat/completions and /v1/messages/count_tokens, on the HTTP thread of the
// request: parse, resolve the name, render and tokenize there; only the turn itself is queued to
// the engine thread (chat_endpoint.cpp). `cache_salt`: the caller's prefix-cache namespace
// (TurnOptions::cache_salt), from the API key it presented.
void handle_chat(ServerState& state, Protocol protocol, const http::Request& req, http::Response& res,
                 uint64_t cache_salt);
void handle_count_tokens(ServerState& state, const http::Request& req, http::Response& res);
// POST /kv/prefix/<chat path>: the request rendered and tokenized as `protocol`'s route would, and
// answered with its blocks' hashes (kv_routes.h) instead of a turn.
void handle_kv_prefix(ServerState& state, Protocol protocol, const http::Request& req, http::Response& res,
                      uint64_t cache_salt);

}  // namespace keel::api
