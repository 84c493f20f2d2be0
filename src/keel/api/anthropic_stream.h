#pragma once
// The Anthropic Messages event stream (see sse_writer.h for the grammar).
//
// Threads: like every StreamWriter (sse_writer.h), one HTTP thread.
#include "keel/api/sse_writer.h"

namespace keel::api {

class AnthropicStreamWriter final : public StreamWriter {
 public:
  std::string start(const std::string& id, const std::string& model, const Usage& usage_so_far) override;
  std::string text(std::string_view delta) override;
  std::string thinking(std::string_view delta) override;
  std::string tool_use(const std::string& id, const std::string& name, const nlohmann::ordered_json& input) override;
  std::string finish(FinishReason reason, const std::string& stop_sequence, const Usage& usage) override;
  std::string ping() override;
  std::string error(const ApiError& error) override;

 private:
  enum class Open { None, Text, Thinking };
  std::string delta(Open kind, std::string_view text);
  std::string close_block();

  Open open_ = Open::None;
  int index_ = 0;  // index of the open block, or of the next one
  bool finished_ = false;
  Open pending_kind_ = Open::None;
  std::string pending_whitespace_;  // whitespace-only deltas not yet worth opening a block for
};

}  // namespace keel::api
