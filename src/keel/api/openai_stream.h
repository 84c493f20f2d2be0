#pragma once
// The OpenAI Chat Completions chunk stream (see sse_writer.h for the grammar).
//
// Threads: like every StreamWriter (sse_writer.h), one HTTP thread.
#include "keel/api/sse_writer.h"

namespace keel::api {

class OpenAIStreamWriter final : public StreamWriter {
 public:
  OpenAIStreamWriter(bool include_usage, int64_t created_unix) : include_usage_(include_usage), created_(created_unix) {}
  std::string start(const std::string& id, const std::string& model, const Usage& usage_so_far) override;
  std::string text(std::string_view delta) override;
  std::string thinking(std::string_view delta) override;
  std::string tool_use(const std::string& id, const std::string& name, const nlohmann::ordered_json& input) override;
  std::string logprobs(const nlohmann::ordered_json& entries) override;
  std::string finish(FinishReason reason, const std::string& stop_sequence, const Usage& usage) override;
  // OpenAI has no ping event; an SSE comment keeps proxies from timing the connection out and every
  // client ignores it.
  std::string ping() override;
  std::string error(const ApiError& error) override;

 private:
  std::string chunk(nlohmann::ordered_json delta, const nlohmann::ordered_json& finish_reason = nullptr,
                    nlohmann::ordered_json logprobs = nullptr) const;

  bool include_usage_;
  int64_t created_;
  std::string id_;
  std::string model_;
  int tool_calls_ = 0;
  bool finished_ = false;
};

}  // namespace keel::api
