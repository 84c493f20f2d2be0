#pragma once
// What the HTTP handlers share (internal to server.cpp and chat_endpoint.cpp). HTTP threads and the
// engine thread both hold a ServerState&; each member says who may touch it.
#include <atomic>
#include <httplib.h>

#include "keel/api/metrics.h"
#include "keel/api/model_registry.h"
#include "keel/api/server.h"
#include "keel/engine/request_queue.h"

namespace keel::api {

struct ServerState {
  // Const after load: HTTP threads render and tokenize with it, the engine thread runs the turns.
  ServedModel& model;
  // The engine thread alone changes it (begin, append, truncate, publish: only inside queued jobs).
  // HTTP threads may call stats() (the pool locks), and policy(), rotate() and capacity(), which
  // never change after construction.
  SessionCache& session;
  const ServerOptions options;  // read by every thread, written by none
  const ModelRegistry registry;  // likewise
  Metrics metrics;                // thread-safe (its own mutex)
  RequestQueue queue;             // thread-safe: HTTP threads submit, the engine thread runs
  std::atomic<int64_t> kv_tokens{0};  // the session cache's size after the last turn (engine writes)
};

// Answers `error` in `protocol`'s envelope.
void send_error(httplib::Response& res, Protocol protocol, const ApiError& error);

// POST /v1/messages, /v1/chat/completions and /v1/messages/count_tokens.
void handle_chat(ServerState& state, Protocol protocol, const httplib::Request& req, httplib::Response& res);
void handle_count_tokens(ServerState& state, const httplib::Request& req, httplib::Response& res);

}  // namespace keel::api
