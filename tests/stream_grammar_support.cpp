// Replays SSE streams the way a strict client would, failing on the first event out of place.
#include <stdexcept>

#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;

[[noreturn]] void fail(size_t at, const SseEvent& e, const std::string& why) {
  throw std::runtime_error("event " + std::to_string(at) + " (" + e.event + " " + e.data + "): " + why);
}

}  // namespace

json replay_anthropic_stream(const std::vector<SseEvent>& events) {
  json message;
  bool started = false, delta_seen = false, stopped = false;
  int open_index = -1;
  size_t next_index = 0;
  std::string partial_json;
  bool block_has_content = false;
  for (size_t i = 0; i < events.size(); ++i) {
    const SseEvent& e = events[i];
    if (stopped) fail(i, e, "event after message_stop");
    json data = json::parse(e.data, nullptr, false);
    if (data.is_discarded() || !data.is_object()) fail(i, e, "data is not a JSON object");
    if (data.value("type", "") != e.event) fail(i, e, "data.type differs from the event name");
    if (e.event == "ping") continue;
    if (e.event == "error") fail(i, e, "error event");
    if (!started) {
      if (e.event != "message_start") fail(i, e, "the stream must open with message_start");
      started = true;
      message = data.at("message");
      if (message.value("role", "") != "assistant" || !message.at("content").empty())
        fail(i, e, "message_start must carry an assistant message with empty content");
      continue;
    }
    if (e.event == "message_start") fail(i, e, "second message_start");
    if (e.event == "content_block_start") {
      if (open_index >= 0) fail(i, e, "a block is already open");
      if (delta_seen) fail(i, e, "block after message_delta");
      if (data.at("index") != next_index) fail(i, e, "block index out of order");
      json block = data.at("content_block");
      const std::string type = block.at("type");
      if (type == "text" && block.at("text") != "") fail(i, e, "text blocks start empty");
      if (type == "tool_use" && (block.at("input") != json::object() || !block.contains("id") || !block.contains("name")))
        fail(i, e, "tool_use blocks start with id, name and input {}");
      message["content"].push_back(block);
      open_index = static_cast<int>(next_index++);
      partial_json.clear();
      block_has_content = false;
    } else if (e.event == "content_block_delta") {
      if (open_index < 0 || data.at("index") != open_index) fail(i, e, "delta for a block that is not open");
      json& block = message["content"][static_cast<size_t>(open_index)];
      const json& d = data.at("delta");
      const std::string dt = d.at("type");
      const std::string bt = block.at("type");
      if (dt == "text_delta" && bt == "text") {
        block["text"] = block["text"].get<std::string>() + d.at("text").get<std::string>();
        block_has_content |= !d.at("text").get<std::string>().empty();
      } else if (dt == "thinking_delta" && bt == "thinking") {
        block["thinking"] = block["thinking"].get<std::string>() + d.at("thinking").get<std::string>();
        block_has_content = true;
      } else if (dt == "signature_delta" && bt == "thinking") {
        block["signature"] = d.at("signature");
      } else if (dt == "input_json_delta" && bt == "tool_use") {
        partial_json += d.at("partial_json").get<std::string>();
        block_has_content = true;
      } else {
        fail(i, e, "delta type " + dt + " does not fit a " + bt + " block");
      }
    } else if (e.event == "content_block_stop") {
      if (open_index < 0 || data.at("index") != open_index) fail(i, e, "stop for a block that is not open");
      json& block = message["content"][static_cast<size_t>(open_index)];
      if (block.at("type") == "tool_use") {
        json input = partial_json.empty() ? json::object() : json::parse(partial_json, nullptr, false);
        if (input.is_discarded() || !input.is_object()) fail(i, e, "input_json_delta parts are not a JSON object: " + partial_json);
        block["input"] = input;
      } else if (block.at("type") == "text" && !block_has_content) {
        fail(i, e, "empty text block");
      }
      open_index = -1;
    } else if (e.event == "message_delta") {
      if (open_index >= 0) fail(i, e, "message_delta while a block is open");
      if (delta_seen) fail(i, e, "second message_delta");
      delta_seen = true;
      message["stop_reason"] = data.at("delta").at("stop_reason");
      message["stop_sequence"] = data.at("delta").value("stop_sequence", json());
      for (auto& [k, v] : data.at("usage").items()) message["usage"][k] = v;
    } else if (e.event == "message_stop") {
      if (!delta_seen) fail(i, e, "message_stop before message_delta");
      stopped = true;
    } else {
      fail(i, e, "unknown event");
    }
  }
  if (!stopped) throw std::runtime_error("the stream ended without message_stop");
  return message;
}

json replay_openai_stream(const std::vector<SseEvent>& events) {
  json out = {{"content", ""}, {"reasoning_content", ""}, {"tool_calls", json::array()}, {"finish_reason", nullptr},
              {"usage", nullptr}};
  bool done = false, finished = false;
  std::string id;
  for (size_t i = 0; i < events.size(); ++i) {
    const SseEvent& e = events[i];
    if (done) fail(i, e, "data after [DONE]");
    if (!e.event.empty()) fail(i, e, "OpenAI streams have no event names");
    if (e.data == "[DONE]") {
      done = true;
      continue;
    }
    json chunk = json::parse(e.data, nullptr, false);
    if (chunk.is_discarded() || chunk.value("object", "") != "chat.completion.chunk") fail(i, e, "not a chat.completion.chunk");
    if (id.empty()) id = chunk.at("id");
    if (chunk.at("id") != id) fail(i, e, "chunk ids differ");
    if (chunk.contains("usage") && !chunk["usage"].is_null()) {
      if (!chunk.at("choices").empty()) fail(i, e, "the usage chunk has empty choices");
      out["usage"] = chunk["usage"];
      continue;
    }
    if (chunk.at("choices").size() != 1) fail(i, e, "one choice per chunk");
    const json& choice = chunk["choices"][0];
    if (finished) fail(i, e, "choice delta after finish_reason");
    const json& delta = choice.at("delta");
    if (delta.contains("content") && delta["content"].is_string())
      out["content"] = out["content"].get<std::string>() + delta["content"].get<std::string>();
    if (delta.contains("reasoning_content") && delta["reasoning_content"].is_string())
      out["reasoning_content"] = out["reasoning_content"].get<std::string>() + delta["reasoning_content"].get<std::string>();
    if (delta.contains("tool_calls")) {
      for (const auto& tc : delta["tool_calls"]) {
        const size_t index = tc.at("index");
        if (index > out["tool_calls"].size()) fail(i, e, "tool call index skips ahead");
        if (index == out["tool_calls"].size()) {
          if (!tc.contains("id") || !tc.contains("function") || !tc["function"].contains("name"))
            fail(i, e, "a new tool call must carry id and function.name");
          out["tool_calls"].push_back({{"id", tc["id"]}, {"name", tc["function"]["name"]}, {"arguments", ""}});
        }
        if (tc.contains("function") && tc["function"].contains("arguments")) {
          json& call = out["tool_calls"][index];
          call["arguments"] = call["arguments"].get<std::string>() + tc["function"]["arguments"].get<std::string>();
        }
      }
    }
    if (!choice.at("finish_reason").is_null()) {
      out["finish_reason"] = choice["finish_reason"];
      finished = true;
    }
  }
  if (!done) throw std::runtime_error("the stream ended without data: [DONE]");
  if (!finished) throw std::runtime_error("no chunk carried a finish_reason");
  return out;
}

}  // namespace keel::test
