#pragma once
// The OpenAI Responses event stream (event: TYPE\ndata: {"type": TYPE, "sequence_number": N, ...}),
// semantic events in the documented order:
//   response.created, response.in_progress                     (a snapshot: status in_progress)
//   per text item:      response.output_item.added, response.content_part.added,
//                       response.output_text.delta..., response.output_text.done,
//                       response.content_part.done, response.output_item.done
//   per reasoning item: the same with reasoning_text parts and response.reasoning_text.delta/.done
//   per function call:  response.output_item.added (arguments ""),
//                       response.function_call_arguments.delta (the whole arguments: keel sends a
//                       call once it is parsed and validated), response.function_call_arguments.done,
//                       response.output_item.done
//   response.completed, or response.incomplete (max_output_tokens), with the whole response and
//   usage; on a failure after the start, an error event and response.failed.
// Item shapes are responses_response.h's.
//
// Threads: like every StreamWriter (sse_writer.h), one HTTP thread.
#include "keel/api/sse_writer.h"

namespace keel::api {

class ResponsesStreamWriter final : public StreamWriter {
 public:
  ResponsesStreamWriter(nlohmann::ordered_json settings, int64_t created_unix)
      : settings_(std::move(settings)), created_(created_unix) {}
  std::string start(const std::string& id, const std::string& model, const Usage& usage_so_far) override;
  std::string text(std::string_view delta) override;
  std::string thinking(std::string_view delta) override;
  std::string tool_use(const std::string& id, const std::string& name, const nlohmann::ordered_json& input) override;
  std::string finish(FinishReason reason, const std::string& stop_sequence, const Usage& usage) override;
  // An SSE comment: the Responses stream has no keep-alive event, and every client ignores it.
  std::string ping() override;
  std::string error(const ApiError& error) override;

 private:
  enum class Open { None, Message, Reasoning };
  std::string event(const char* type, nlohmann::ordered_json data);
  std::string snapshot(const char* type, const char* status, const nlohmann::ordered_json& usage,
                       const nlohmann::ordered_json& incomplete_details = nullptr);
  // Opens an item of `kind` unless one is open already (closing any other first).
  std::string open(Open kind);
  std::string close();

  nlohmann::ordered_json settings_;
  int64_t created_;
  std::string id_;
  std::string model_;
  int64_t sequence_ = 0;
  nlohmann::ordered_json output_ = nlohmann::ordered_json::array();  // finished items
  Open open_ = Open::None;
  std::string item_id_;    // of the open item
  std::string item_text_;  // of the open item, so far
  bool finished_ = false;
};

}  // namespace keel::api
