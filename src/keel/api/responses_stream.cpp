#include "keel/api/responses_stream.h"

#include "keel/api/json_text.h"
#include "keel/api/responses_response.h"

namespace keel::api {

using Json = nlohmann::ordered_json;

std::string ResponsesStreamWriter::event(const char* type, Json data) {
  Json e = {{"type", type}, {"sequence_number", sequence_++}};
  for (auto& [key, value] : data.items()) e[key] = std::move(value);
  return std::string("event: ") + type + "\ndata: " + to_json_text(e) + "\n\n";
}

std::string ResponsesStreamWriter::snapshot(const char* type, const char* status, const Json& usage,
                                            const Json& incomplete_details) {
  return event(type, {{"response", responses_object(id_, created_, model_, settings_, status, output_, usage,
                                                    incomplete_details)}});
}

std::string ResponsesStreamWriter::start(const std::string& id, const std::string& model, const Usage&) {
  id_ = id;
  model_ = model;
  std::string out = snapshot("response.created", "in_progress", nullptr);
  return out + snapshot("response.in_progress", "in_progress", nullptr);
}

std::string ResponsesStreamWriter::open(Open kind) {
  if (open_ == kind) return {};
  std::string out = close();
  open_ = kind;
  item_text_.clear();
  const int64_t index = static_cast<int64_t>(output_.size());
  if (kind == Open::Message) {
    item_id_ = new_item_id("msg_");
    Json item = responses_message_item(item_id_, "", "in_progress");
    item["content"] = Json::array();
    out += event("response.output_item.added", {{"output_index", index}, {"item", std::move(item)}});
    out += event("response.content_part.added",
                 {{"item_id", item_id_}, {"output_index", index}, {"content_index", 0},
                  {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", Json::array()}, {"logprobs", Json::array()}}}});
  } else {
    item_id_ = new_item_id("rs_");
    Json item = responses_reasoning_item(item_id_, "");
    item["content"] = Json::array();
    out += event("response.output_item.added", {{"output_index", index}, {"item", std::move(item)}});
    out += event("response.content_part.added", {{"item_id", item_id_}, {"output_index", index}, {"content_index", 0},
                                                  {"part", {{"type", "reasoning_text"}, {"text", ""}}}});
  }
  return out;
}

std::string ResponsesStreamWriter::close() {
  if (open_ == Open::None) return {};
  const int64_t index = static_cast<int64_t>(output_.size());
  const Json where = {{"item_id", item_id_}, {"output_index", index}, {"content_index", 0}};
  std::string out;
  Json item;
  if (open_ == Open::Message) {
    Json done = where;
    done["text"] = item_text_;
    done["logprobs"] = Json::array();
    out += event("response.output_text.done", std::move(done));
    item = responses_message_item(item_id_, item_text_, "completed");
    Json part = where;
    part["part"] = item["content"][0];
    out += event("response.content_part.done", std::move(part));
  } else {
    Json done = where;
    done["text"] = item_text_;
    out += event("response.reasoning_text.done", std::move(done));
    item = responses_reasoning_item(item_id_, item_text_);
    Json part = where;
    part["part"] = item["content"][0];
    out += event("response.content_part.done", std::move(part));
  }
  out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
  output_.push_back(std::move(item));
  open_ = Open::None;
  return out;
}

std::string ResponsesStreamWriter::text(std::string_view delta) {
  if (finished_ || delta.empty()) return {};
  std::string out = open(Open::Message);
  item_text_ += delta;
  out += event("response.output_text.delta", {{"item_id", item_id_}, {"output_index", output_.size()},
                                               {"content_index", 0}, {"delta", std::string(delta)},
                                               {"logprobs", Json::array()}});
  return out;
}

std::string ResponsesStreamWriter::thinking(std::string_view delta) {
  if (finished_ || delta.empty()) return {};
  std::string out = open(Open::Reasoning);
  item_text_ += delta;
  out += event("response.reasoning_text.delta", {{"item_id", item_id_}, {"output_index", output_.size()},
                                                  {"content_index", 0}, {"delta", std::string(delta)}});
  return out;
}

std::string ResponsesStreamWriter::tool_use(const std::string& call_id, const std::string& name, const Json& input) {
  if (finished_) return {};
  std::string out = close();
  const std::string id = new_item_id("fc_");
  const std::string arguments = responses_arguments(input);
  const int64_t index = static_cast<int64_t>(output_.size());
  out += event("response.output_item.added",
               {{"output_index", index}, {"item", responses_function_call_item(id, call_id, name, "", "in_progress")}});
  out += event("response.function_call_arguments.delta", {{"item_id", id}, {"output_index", index}, {"delta", arguments}});
  out += event("response.function_call_arguments.done",
               {{"item_id", id}, {"output_index", index}, {"name", name}, {"arguments", arguments}});
  Json item = responses_function_call_item(id, call_id, name, arguments, "completed");
  out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
  output_.push_back(std::move(item));
  return out;
}

std::string ResponsesStreamWriter::finish(FinishReason reason, const std::string&, const Usage& usage) {
  if (finished_) return {};
  std::string out = close();
  finished_ = true;
  const char* status = responses_status(reason);
  const char* type = reason == FinishReason::MaxTokens ? "response.incomplete" : "response.completed";
  return out + snapshot(type, status, responses_usage_json(usage), responses_incomplete_details(reason));
}

std::string ResponsesStreamWriter::ping() {
  if (finished_) return {};
  return ": ping\n\n";
}

std::string ResponsesStreamWriter::error(const ApiError& e) {
  if (finished_) return {};
  finished_ = true;
  const Json body = Json::parse(error_body(Protocol::Responses, e))["error"];
  std::string out = event("error", {{"code", body["code"]}, {"message", body["message"]}, {"param", body["param"]}});
  Json failed = responses_object(id_, created_, model_, settings_, "failed", output_, nullptr);
  failed["error"] = {{"code", body["code"].is_null() ? Json(body["type"]) : body["code"]}, {"message", body["message"]}};
  return out + event("response.failed", {{"response", std::move(failed)}});
}

}  // namespace keel::api
