#include "keel/eval/transcript_recorder.h"

#include "keel/api/anthropic_messages.h"
#include "keel/engine/chat_turn.h"
#include "keel/engine/session_cache.h"
#include "keel/eval/task_suite.h"
#include "keel/kv/kv_footprint.h"
#include "keel/util/error.h"

namespace keel::eval {

using json = nlohmann::ordered_json;

std::vector<RecordRequest> requests_from_session(const json& session, const std::string& where) {
  if (!session.is_object() || !session.contains("cases") || !session["cases"].is_array())
    throw Error(where + ": expected an object with a \"cases\" array");
  std::vector<RecordRequest> out;
  for (const json& c : session["cases"]) {
    if (!c.is_object() || !c.contains("request") || !c["request"].is_object())
      throw Error(where + ": every case needs a \"request\" object");
    out.push_back({c.value("name", "case " + std::to_string(out.size() + 1)), c["request"]});
  }
  return out;
}

Transcript record_transcript(ServedModel& model, const RecordRequest& request) {
  const json& req = request.anthropic_request;
  if (!req.contains("messages") || !req["messages"].is_array() || req["messages"].empty())
    throw Error("request '" + request.name + "': \"messages\" must be a non-empty array");
  Transcript t;
  t.name = request.name;
  t.messages = json::array();
  if (req.contains("system")) api::convert_anthropic_system(req["system"], t.messages);
  api::convert_anthropic_messages(req["messages"], t.messages);
  if (req.contains("tools") && req["tools"].is_array() && !req["tools"].empty()) {
    t.tools = json::array();
    for (const json& tool : req["tools"]) t.tools.push_back(to_function_tool(tool));
  }

  const PreparedPrompt prompt = model.prepare(t.messages, t.tools, false);
  TurnOptions options;
  options.max_tokens = req.value("max_tokens", int64_t{256});
  options.tools = t.tools;
  const int64_t context = static_cast<int64_t>(prompt.ids.size()) + options.max_tokens + 16;
  const ModelSpec& spec = model.weights().spec;
  const auto budget =
      static_cast<int64_t>(kv::kv_bytes_per_token(spec, kv::KvPolicy(), context) * static_cast<double>(context)) * 2;
  SessionCache session(spec, budget, kv::KvPolicy(), true, context);

  std::string text;
  json calls = json::array();
  run_turn(model, session, prompt, options, [&](TurnEvent&& e) {
    if (e.kind == TurnEvent::Kind::Text) text += e.text;
    if (e.kind != TurnEvent::Kind::ToolCall) return;
    calls.push_back({{"id", "call_" + std::to_string(calls.size())},
                     {"type", "function"},
                     {"function", {{"name", e.name}, {"arguments", e.arguments}}}});
  });
  json answer = {{"role", "assistant"}, {"content", text}};
  if (!calls.empty()) answer["tool_calls"] = calls;
  t.messages.push_back(std::move(answer));
  return t;
}

}  // namespace keel::eval
