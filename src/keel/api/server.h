#pragma once
// `keel serve`: the HTTP edge. Routes requests of both APIs to one served model, queues them to
// the engine thread, streams the results back, and answers every failure in the protocol's own
// error envelope. See docs/serve.md.
//
// Threads: construct, bind and run on one thread (run blocks, serving on keel/http's I/O thread and workers
// while the Scheduler's engine thread runs the turns); stop may come from any other thread. The
// ServedModel and SessionCache must outlive the Server. Who may touch what while it serves:
// server_state.h.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "keel/api/chat_request.h"
#include "keel/api/warmup.h"

namespace keel {
class ServedModel;
class SessionCache;
}

namespace keel::api {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 4000;  // 0: any free port (the bound one is logged)
  // Empty: no authentication. Any one of them admits a request; with two or more, each key's
  // requests reuse only the prefix cache of that key (a cache salt per key).
  std::vector<std::string> api_keys;
  // Browser-facing rules (keel/api/http_access.h): Host names and Origins accepted besides
  // loopback; "*" for any.
  std::vector<std::string> allow_hosts;
  std::vector<std::string> allow_origins;
  std::vector<std::string> aliases;
  RequestLimits limits;
  size_t max_body_bytes = 32u << 20;
  // The memory requests may take while they are parsed, rendered and tokenized, all together
  // (PreparationGate); raised to at least what one body of max_body_bytes needs. keel serve sizes
  // it from the plan: what the memory ceiling leaves after weights, KV pool and scratch.
  size_t preparation_budget_bytes = 0;
  size_t queue_depth = 64;       // requests waiting for the engine before "overloaded"
  size_t parallel = 4;           // turns the scheduler runs at once (engine/scheduler.h)
  int tool_retries = 2;
  // --constrained-tool-calls: a tool's call arguments are decoded under its schema's grammar
  // (engine/output_constraint.h) unless the request marks the tool strict: false.
  bool constrained_tool_calls = true;
  std::chrono::milliseconds ping_interval{5000};
  // After shutdown(): how long running turns may go on before they are cancelled.
  std::chrono::seconds shutdown_grace{10};
  // --capture-requests: every admitted chat request's body is saved here (request_capture.h), for
  // --warm. Empty: nothing is saved.
  std::filesystem::path capture_dir;
};

class Server {
 public:
  Server(ServedModel& model, SessionCache& session, ServerOptions options);
  ~Server();

  // Binds the socket (throws keel::Error if it cannot) and returns the port.
  int bind();
  // Queues the --warm requests as background turns (warmup.h); before run(), on its thread.
  void warm(std::vector<WarmRequest> requests);
  // Serves until stop(), or until shutdown() has drained every connection.
  void run();
  // Graceful: no new connections, idle ones closed; running turns may finish within
  // options.shutdown_grace and are then cancelled (streams end with an error event, others get
  // 503); waiting ones get 503 without running. run() returns once every connection is done.
  void shutdown();
  // At once: every connection closed, run() returns.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace keel::api
