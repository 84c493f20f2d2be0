#include "scripted_turn_support.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "keel/kv/kv_footprint.h"
#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;

bool inside_unsplittable(const ScriptedSetup& setup, const std::string& output, size_t cut) {
  for (const std::string& t : setup.unsplittable) {
    for (size_t at = output.find(t); at != std::string::npos; at = output.find(t, at + 1))
      if (cut > at && cut < at + t.size()) return true;
  }
  return false;
}

api::FinishReason finish_reason(TurnFinish f) {
  switch (f) {
    case TurnFinish::ToolUse: return api::FinishReason::ToolUse;
    case TurnFinish::MaxTokens:
    case TurnFinish::ContextFull: return api::FinishReason::MaxTokens;
    case TurnFinish::StopSequence: return api::FinishReason::StopSequence;
    default: return api::FinishReason::EndTurn;
  }
}

std::vector<std::string> with_stop(std::vector<std::string> content, const std::string& stop) {
  content.push_back("stop: " + stop);
  return content;
}

}  // namespace

SessionCache make_scripted_session(ServedModel& model) {
  const ModelSpec& spec = model.weights().spec;
  const int64_t context = 2048;
  const auto budget = static_cast<int64_t>(kv::kv_bytes_per_token(spec, kv::KvPolicy(), context) * context) * 2;
  return SessionCache(spec, budget, kv::KvPolicy(), true, context);
}

std::vector<int32_t> script_tokens(const text::Tokenizer& tok, const std::string& output, const std::vector<size_t>& cuts,
                                   const std::string& after) {
  std::vector<std::string> pieces;
  size_t from = 0;
  for (size_t cut : cuts) {
    pieces.push_back(output.substr(from, cut - from));
    from = cut;
  }
  pieces.push_back(output.substr(from));
  pieces.push_back(after);
  std::vector<int32_t> ids;
  for (const std::string& piece : pieces) {
    const std::vector<int32_t> more = tok.encode(piece);
    ids.insert(ids.end(), more.begin(), more.end());
  }
  return ids;
}

ScriptedTurn run_scripted(const ScriptedSetup& setup, SessionCache& session, const std::vector<int32_t>& script) {
  ServedModel& model = *setup.model;
  TurnOptions o;
  o.tools = setup.tools;
  // Room for the whole script on every attempt: retried tokens count against max_tokens.
  o.max_tokens = (static_cast<int64_t>(script.size()) + 1) * (o.tool_retries + 1) + 16;
  o.reasoning = true;
  const int32_t eos = model.weights().eos_token_ids.front();
  o.logits_processor = [&](std::span<const int32_t> generated, std::span<float> logits) {
    const int32_t next = generated.size() < script.size() ? script[generated.size()] : eos;
    for (float& l : logits) l = 0.0f;
    logits[static_cast<size_t>(next)] = 100.0f;
  };
  ScriptedTurn t;
  t.result = run_turn(model, session, *setup.prompt, o, [&](TurnEvent&& e) { t.events.push_back(std::move(e)); });
  return t;
}

std::string stream_turn(api::Protocol protocol, const ScriptedTurn& turn) {
  api::ChatRequest request;
  request.protocol = protocol;
  auto writer = api::make_stream_writer(request, 0);
  std::string sse = writer->start("msg_1", "scripted", api::Usage{});
  int calls = 0;
  for (const TurnEvent& e : turn.events) {
    if (e.kind == TurnEvent::Kind::Text) sse += writer->text(e.text);
    if (e.kind == TurnEvent::Kind::Reasoning) sse += writer->thinking(e.text);
    if (e.kind == TurnEvent::Kind::ToolCall) sse += writer->tool_use("call_" + std::to_string(++calls), e.name, e.arguments);
  }
  return sse + writer->finish(finish_reason(turn.result.finish), turn.result.stop_sequence, api::Usage{});
}

std::vector<std::string> anthropic_content(const std::string& sse) {
  const json message = replay_anthropic_stream(parse_sse(sse));
  std::vector<std::string> out;
  for (const json& block : message.at("content")) {
    const std::string type = block.at("type");
    if (type == "thinking") out.push_back("thinking: " + block.at("thinking").get<std::string>());
    if (type == "text") out.push_back("text: " + block.at("text").get<std::string>());
    if (type == "tool_use") out.push_back("tool_use: " + block.at("name").get<std::string>() + " " + block.at("input").dump());
  }
  out.push_back("stop: " + message.at("stop_reason").get<std::string>());
  return out;
}

std::vector<std::string> openai_content(const std::string& sse) {
  const std::vector<SseEvent> events = parse_sse(sse);
  const json whole = replay_openai_stream(events);
  std::vector<std::string> out;
  std::string last_kind;
  auto append = [&](const std::string& kind, const std::string& text) {
    if (text.empty()) return;
    if (kind == last_kind && kind != "tool_use") out.back() += text;
    else out.push_back(kind + ": " + text);
    last_kind = kind;
  };
  for (const SseEvent& e : events) {
    if (e.data == "[DONE]") continue;
    const json chunk = json::parse(e.data);
    if (chunk.at("choices").empty()) continue;
    const json& delta = chunk["choices"][0].at("delta");
    if (delta.contains("reasoning_content")) append("thinking", delta["reasoning_content"]);
    if (delta.contains("content") && delta["content"].is_string()) append("text", delta["content"]);
    if (delta.contains("tool_calls")) {
      for (const json& tc : delta["tool_calls"]) {
        if (tc.contains("id")) {
          append("tool_use", tc["function"]["name"].get<std::string>() + " ");
        } else {
          out.back() += tc["function"]["arguments"].get<std::string>();
        }
      }
    }
  }
  const auto calls = std::count_if(out.begin(), out.end(), [](const std::string& s) { return s.starts_with("tool_use: "); });
  EXPECT_EQ(static_cast<size_t>(calls), whole.at("tool_calls").size());
  out.push_back("stop: " + whole.at("finish_reason").get<std::string>());
  return out;
}

std::vector<json> anthropic_call_arguments(const std::string& sse) {
  std::vector<json> out;
  const json message = replay_anthropic_stream(parse_sse(sse));
  for (const json& block : message.at("content"))
    if (block.at("type") == "tool_use") out.push_back(block.at("input"));
  return out;
}

std::vector<json> openai_call_arguments(const std::string& sse) {
  std::vector<json> out;
  const json message = replay_openai_stream(parse_sse(sse));
  for (const json& call : message.at("tool_calls"))
    out.push_back(json::parse(call.at("arguments").get<std::string>()));
  return out;
}

void expect_every_cut_streams(const ScriptedSetup& setup, const std::string& output, const std::string& after,
                              const std::vector<std::string>& content, const std::string& anthropic_stop,
                              const std::string& openai_stop, std::vector<ScriptedTurn>* turns) {
  const std::vector<std::string> want_anthropic = with_stop(content, anthropic_stop);
  const std::vector<std::string> want_openai = with_stop(content, openai_stop);
  SessionCache session = make_scripted_session(*setup.model);
  const size_t stride = output.size() / kCutsPerRun + 1;
  size_t covered = 0;
  for (size_t first = 0; first < stride; ++first) {
    std::vector<size_t> cuts;
    for (size_t cut = first; cut <= output.size(); cut += stride)
      if (!inside_unsplittable(setup, output, cut)) cuts.push_back(cut);
    covered += cuts.size();
    ScriptedTurn turn = run_scripted(setup, session, script_tokens(setup.model->tokenizer(), output, cuts, after));
    ASSERT_EQ(anthropic_content(stream_turn(api::Protocol::Anthropic, turn)), want_anthropic) << "cuts from " << first;
    ASSERT_EQ(openai_content(stream_turn(api::Protocol::OpenAI, turn)), want_openai) << "cuts from " << first;
    if (turns) turns->push_back(std::move(turn));
  }
  size_t unsplittable_inner = 0;
  for (size_t cut = 0; cut <= output.size(); ++cut) unsplittable_inner += inside_unsplittable(setup, output, cut) ? 1 : 0;
  EXPECT_EQ(covered + unsplittable_inner, output.size() + 1);
}

}  // namespace keel::test
