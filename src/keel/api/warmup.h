#pragma once
// keel serve --warm REQUEST.json: saved request bodies (an Anthropic Messages or OpenAI Chat
// Completions body, as a client sends it; --capture-requests writes them) prefilled at start so
// the first real request that shares their prefix (Claude Code's system prompt and tools) reuses
// it. Each runs through the scheduler as a background turn of one token: it starts only while the
// engine is idle and yields to any real request (engine/scheduler.h).
//
// Threads: read_warm_request() anywhere; start_warmup() once, before the server runs, on the
// thread that starts it; WarmupStatus is atomics, read by any thread (/health, /metrics).
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "keel/api/api_error.h"

namespace keel::api {

struct ServerState;

struct WarmRequest {
  std::filesystem::path path;  // for the log
  Protocol protocol = Protocol::Anthropic;
  std::string body;
};

// Reads and parses the file: an Anthropic Messages body, else an OpenAI Chat Completions one.
// Throws keel::Error naming the file when it is neither (with both parsers' reasons).
WarmRequest read_warm_request(const std::filesystem::path& path);

struct WarmupStatus {
  std::atomic<int64_t> total{0};     // requests given
  std::atomic<int64_t> done{0};      // prefilled
  std::atomic<int64_t> failed{0};    // could not be rendered or run (logged)
  std::atomic<int64_t> prompt_tokens{0};  // of those done
  std::atomic<int64_t> reused_tokens{0};  // of those, found cached already (the disk tier, or each other)
  bool warming() const { return done + failed < total; }
};

// Renders each request with the served model and queues it (a failure is logged and counted,
// never fatal); progress goes to s.warmup.
void start_warmup(ServerState& s, std::vector<WarmRequest> requests);

}  // namespace keel::api
