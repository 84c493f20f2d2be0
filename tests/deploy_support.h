#pragma once
// keel replicas behind HAProxy for the deployment tests (issue #36): deploy/haproxy/run-replicas
// started on free loopback ports, and Claude-Code-shaped sessions sent through it as streams,
// timed and checked event by event.
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace keel::test {

// run-replicas with `replicas` replicas of `model` (an unsanitized keel when the build has one:
// three sanitized replicas on two cores would measure the sanitizer). Stopped with SIGTERM, as a
// supervisor would, when the object goes away.
class Deployment {
 public:
  Deployment(const std::filesystem::path& model, int replicas, const std::string& balance = "",
             std::vector<std::string> keel_flags = {});
  ~Deployment();
  Deployment(const Deployment&) = delete;
  Deployment& operator=(const Deployment&) = delete;

  int port() const { return port_; }                          // HAProxy's
  int replica_port(int i) const { return first_port_ + i - 1; }  // i from 1
  pid_t replica_pid(int i) const;
  std::string log(const std::string& name) const;  // "haproxy" or "keel1"...

 private:
  TempDir dir_;
  pid_t pid_ = -1;
  int port_ = 0, first_port_ = 0;
};

// One streamed /v1/messages request as a client sees it.
struct StreamedTurn {
  int status = 0;         // 0: no HTTP answer at all
  bool complete = false;  // a 200 stream that ended with message_stop
  std::string replica;    // X-Keel-Replica: which replica answered
  double seconds_to_first_token = -1;  // until the first content block began (-1: none did)
  double seconds = 0;  // until the answer ended (or broke)
  nlohmann::ordered_json message;  // the rebuilt message, when complete
  int64_t input_tokens = 0, cache_read_tokens = 0, cache_creation_tokens = 0;
  std::string error;  // why it is not complete

  double cached_share() const;  // cache_read over the whole prompt
};
// Sends `request` (stream set here) with Claude Code's session header, and reads the answer to
// its end. A stream cut mid-way comes back incomplete with the error that ended it.
// `on_started` runs (on this thread) when message_start arrives: the turn is running.
StreamedTurn stream_turn(int port, const nlohmann::ordered_json& request, const std::string& session,
                         const std::function<void()>& on_started = {},
                         std::chrono::seconds timeout = std::chrono::seconds(120));

// A Claude Code-shaped session: a system prompt whose first part every session shares and whose
// second is its own (working directory, notes: as Claude Code's environment block and CLAUDE.md),
// the same three tools for all, and turns that add the answer and a tool-result-sized message.
nlohmann::ordered_json session_request(const std::string& session, int max_tokens);
nlohmann::ordered_json next_session_request(nlohmann::ordered_json request, const nlohmann::ordered_json& answer,
                                            int turn);

// Free loopback ports: `count` consecutive ones.
int free_ports(int count);

double percentile(std::vector<double> values, double p);

}  // namespace keel::test
