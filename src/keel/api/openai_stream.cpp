#include "keel/api/openai_stream.h"

#include "keel/api/json_text.h"

namespace keel::api {

namespace {

using Json = nlohmann::ordered_json;

std::string data_line(const Json& data) { return "data: " + to_json_text(data) + "\n\n"; }

}  // namespace

std::string OpenAIStreamWriter::chunk(Json delta, const Json& finish_reason, Json logprobs) const {
  Json choice = {{"index", 0}, {"delta", std::move(delta)}, {"logprobs", std::move(logprobs)}, {"finish_reason", finish_reason}};
  Json data = {{"id", id_},
               {"object", "chat.completion.chunk"},
               {"created", created_},
               {"model", model_},
               {"choices", Json::array({std::move(choice)})}};
  if (include_usage_) data["usage"] = nullptr;
  return data_line(data);
}

std::string OpenAIStreamWriter::start(const std::string& id, const std::string& model, const Usage&) {
  id_ = id;
  model_ = model;
  return chunk({{"role", "assistant"}, {"content", ""}});
}

std::string OpenAIStreamWriter::text(std::string_view delta) {
  if (finished_ || delta.empty()) return {};
  return chunk({{"content", std::string(delta)}});
}

std::string OpenAIStreamWriter::thinking(std::string_view delta) {
  if (finished_ || delta.empty()) return {};
  return chunk({{"reasoning_content", std::string(delta)}});
}

std::string OpenAIStreamWriter::tool_use(const std::string& id, const std::string& name, const Json& input) {
  if (finished_) return {};
  int index = tool_calls_++;
  Json opening = {{"index", index}, {"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", ""}}}};
  Json arguments = {{"index", index}, {"function", {{"arguments", to_json_text(input.is_object() ? input : Json::object())}}}};
  return chunk({{"tool_calls", Json::array({std::move(opening)})}}) + chunk({{"tool_calls", Json::array({std::move(arguments)})}});
}

std::string OpenAIStreamWriter::logprobs(const Json& entries) {
  if (finished_ || entries.empty()) return {};
  return chunk(Json::object(), nullptr, {{"content", entries}, {"refusal", nullptr}});
}

std::string OpenAIStreamWriter::finish(FinishReason reason, const std::string&, const Usage& usage) {
  if (finished_) return {};
  finished_ = true;
  std::string out = chunk(Json::object(), openai_finish_reason(reason));
  if (include_usage_) {
    Json data = {{"id", id_},
                 {"object", "chat.completion.chunk"},
                 {"created", created_},
                 {"model", model_},
                 {"choices", Json::array()},
                 {"usage", openai_usage_json(usage)}};
    out += data_line(data);
  }
  return out + "data: [DONE]\n\n";
}

std::string OpenAIStreamWriter::ping() {
  if (finished_) return {};
  return ": ping\n\n";
}

std::string OpenAIStreamWriter::error(const ApiError& e) {
  if (finished_) return {};
  finished_ = true;
  return "data: " + error_body(Protocol::OpenAI, e) + "\n\ndata: [DONE]\n\n";
}

}  // namespace keel::api
