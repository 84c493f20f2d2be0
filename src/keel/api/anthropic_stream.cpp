#include "keel/api/anthropic_stream.h"

#include "keel/api/json_text.h"

namespace keel::api {

namespace {

using Json = nlohmann::ordered_json;

std::string event(std::string_view name, const Json& data) {
  std::string out = "event: ";
  out += name;
  out += "\ndata: ";
  out += to_json_text(data);
  out += "\n\n";
  return out;
}

}  // namespace

std::string AnthropicStreamWriter::start(const std::string& id, const std::string& model, const Usage& usage_so_far) {
  Json message = {{"id", id},
                  {"type", "message"},
                  {"role", "assistant"},
                  {"model", model},
                  {"content", Json::array()},
                  {"stop_reason", nullptr},
                  {"stop_sequence", nullptr},
                  {"usage", anthropic_usage_json(usage_so_far)}};
  return event("message_start", {{"type", "message_start"}, {"message", std::move(message)}});
}

std::string AnthropicStreamWriter::close_block() {
  pending_whitespace_.clear();
  if (open_ == Open::None) return {};
  std::string out;
  if (open_ == Open::Thinking)
    out += event("content_block_delta", {{"type", "content_block_delta"},
                                         {"index", index_},
                                         {"delta", {{"type", "signature_delta"}, {"signature", ""}}}});
  out += event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
  open_ = Open::None;
  ++index_;
  return out;
}

std::string AnthropicStreamWriter::delta(Open kind, std::string_view piece) {
  if (finished_ || piece.empty()) return {};
  std::string text(piece);
  if (open_ != kind) {
    // Whitespace alone does not open a block (the "\n" a model writes before a tool call would
    // otherwise become an empty-looking text block); it is kept and sent with the first real text.
    if (pending_kind_ != kind) pending_whitespace_.clear();
    pending_kind_ = kind;
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
      pending_whitespace_ += text;
      return {};
    }
    text = pending_whitespace_ + text;
    pending_whitespace_.clear();
  }
  std::string out;
  const char* block_type = kind == Open::Text ? "text" : "thinking";
  if (open_ != kind) {
    out += close_block();
    Json block = {{"type", block_type}, {block_type, ""}};
    if (kind == Open::Thinking) block["signature"] = "";
    out += event("content_block_start", {{"type", "content_block_start"}, {"index", index_}, {"content_block", std::move(block)}});
    open_ = kind;
  }
  Json d = {{"type", kind == Open::Text ? "text_delta" : "thinking_delta"}, {block_type, std::move(text)}};
  out += event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(d)}});
  return out;
}

std::string AnthropicStreamWriter::text(std::string_view d) { return delta(Open::Text, d); }
std::string AnthropicStreamWriter::thinking(std::string_view d) { return delta(Open::Thinking, d); }

std::string AnthropicStreamWriter::tool_use(const std::string& id, const std::string& name, const Json& input) {
  if (finished_) return {};
  std::string out = close_block();
  Json block = {{"type", "tool_use"}, {"id", id}, {"name", name}, {"input", Json::object()}};
  out += event("content_block_start", {{"type", "content_block_start"}, {"index", index_}, {"content_block", std::move(block)}});
  std::string arguments = to_json_text(input.is_object() ? input : Json::object());
  out += event("content_block_delta", {{"type", "content_block_delta"},
                                       {"index", index_},
                                       {"delta", {{"type", "input_json_delta"}, {"partial_json", arguments}}}});
  out += event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
  ++index_;
  return out;
}

std::string AnthropicStreamWriter::finish(FinishReason reason, const std::string& stop_sequence, const Usage& usage) {
  if (finished_) return {};
  std::string out = close_block();
  Json delta = {{"stop_reason", anthropic_stop_reason(reason)}, {"stop_sequence", nullptr}};
  if (reason == FinishReason::StopSequence) delta["stop_sequence"] = stop_sequence;
  out += event("message_delta", {{"type", "message_delta"}, {"delta", std::move(delta)}, {"usage", anthropic_usage_json(usage)}});
  out += event("message_stop", {{"type", "message_stop"}});
  finished_ = true;
  return out;
}

std::string AnthropicStreamWriter::ping() {
  if (finished_) return {};
  return event("ping", {{"type", "ping"}});
}

std::string AnthropicStreamWriter::error(const ApiError& e) {
  if (finished_) return {};
  finished_ = true;
  return event("error", {{"type", "error"}, {"error", {{"type", e.type}, {"message", e.what()}}}});
}

}  // namespace keel::api
