#pragma once
// What the HTTP handlers share (internal to server.cpp and chat_endpoint.cpp).
#include <atomic>
#include <httplib.h>

#include "keel/api/metrics.h"
#include "keel/api/model_registry.h"
#include "keel/api/server.h"
#include "keel/engine/request_queue.h"

namespace keel::api {

struct ServerState {
  ServedModel& model;
  SessionCache& session;  // touched only by jobs on the engine thread
  ServerOptions options;
  ModelRegistry registry;
  Metrics metrics;
  RequestQueue queue;
  std::atomic<int64_t> kv_tokens{0};  // the session cache's size after the last turn
};

// Answers `error` in `protocol`'s envelope.
void send_error(httplib::Response& res, Protocol protocol, const ApiError& error);

// POST /v1/messages, /v1/chat/completions and /v1/messages/count_tokens.
void handle_chat(ServerState& state, Protocol protocol, const httplib::Request& req, httplib::Response& res);
void handle_count_tokens(ServerState& state, const httplib::Request& req, httplib::Response& res);

}  // namespace keel::api
