#pragma once
// Builds fidelity transcripts from real requests: each Anthropic Messages request (system,
// messages, tools: what Claude Code sends) is converted the way `keel serve` converts it, run once
// through the serving path (run_turn, greedy, bf16 KV), and recorded with the model's own answer
// (text and tool calls) appended as the last assistant message.
//
// Threads: requests_from_session is a pure function: any thread. record_transcript runs the model's
// forward pass on the calling thread, which must own `model` for the call (one call per model at a
// time).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "keel/engine/served_model.h"
#include "keel/eval/transcripts.h"

namespace keel::eval {

struct RecordRequest {
  std::string name;
  nlohmann::ordered_json anthropic_request;  // {system?, messages, tools?, max_tokens?}
};

// The "cases" of a session fixture ({"cases": [{"name", "request"}, ...]}) as requests.
std::vector<RecordRequest> requests_from_session(const nlohmann::ordered_json& session, const std::string& where);

Transcript record_transcript(ServedModel& model, const RecordRequest& request);

}  // namespace keel::eval
