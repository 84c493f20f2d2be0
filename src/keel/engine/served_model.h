#pragma once
// Everything `keel serve` needs of one model, loaded once at start from its resolved ModelSource
// (arch/model_source.h): weights and the forward pass, tokenizer, the source's chat template, and
// the tool-call format and reasoning control read from that template.
//
// Threads: built once, on the thread that starts the command, then shared. The const members read
// only what loading fixed, so any number of threads may call them at once: `keel serve` renders
// and tokenizes each request on its HTTP thread with prepare() (chat::ChatTemplate::render keeps
// its state per call; text::Tokenizer is safe from many threads). transformer() is the exception:
// a forward pass owns the activation buffers and the thread pool, so one thread at a time (the
// engine thread in `keel serve`).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "keel/arch/model_source.h"
#include "keel/arch/transformer.h"
#include "keel/chat/chat_renderer.h"
#include "keel/chat/chat_roles.h"
#include "keel/engine/prompt_render.h"
#include "keel/model/weights.h"
#include "keel/text/tokenizer.h"
#include "keel/toolcall/format_detect.h"
#include "keel/util/thread_pool.h"

namespace keel::constrain {
class Vocabulary;
}

namespace keel {

struct ServedModelOptions {
  int threads = 0;                                          // 0: one per core
  std::optional<toolcall::ToolCallFormat> tool_call_format = {};  // overrides detection
};

// A prompt ready for the engine: token ids and the role of each.
struct PreparedPrompt {
  std::vector<int32_t> ids;
  std::vector<chat::Role> roles;
  bool starts_in_reasoning = false;  // the generation prompt already opened a reasoning block
};

class ServedModel {
 public:
  ServedModel(const arch::ModelSource& model, const ServedModelOptions& options);  // throws keel::Error
  ~ServedModel();

  const std::filesystem::path& dir() const { return weights_.dir; }
  // The name the server answers to (ModelSource::name): the model folder's, or the GGUF file's.
  const std::string& name() const { return name_; }
  const ModelWeights& weights() const { return weights_; }
  Transformer& transformer() { return *transformer_; }
  const text::Tokenizer& tokenizer() const { return *tokenizer_; }
  // Output rows no token has (ids_without_token): masked before every sample.
  const std::vector<int32_t>& ids_without_token() const { return ids_without_token_; }
  // The tokens as the bytes they write, for constrained decoding: built on first use (a few
  // hundred milliseconds for a 151k vocabulary), then shared.
  const constrain::Vocabulary& vocabulary() const;
  const toolcall::ToolCallFormatInfo& tool_call_format() const { return format_; }
  std::string tool_call_format_origin() const { return format_origin_; }
  const toolcall::ReasoningControl& reasoning() const { return template_reading_.reasoning; }
  int threads() const { return pool_->size(); }

  // Renders messages and tools (OpenAI form; tools null for none) through the model's template
  // with the generation prompt, then tokenizes and labels every token with its role. With
  // `continue_last`, the last (assistant) message is left open for the model to continue instead.
  // System messages after the first message render in place when the template accepts them there,
  // else they are folded into a user message (chat/system_fold.h). Special tokens become control
  // tokens only in the template's own markup, never in text the client wrote
  // (chat::encode_rendered_prompt).
  // `controls` set the template variables a request decides (enable_thinking, reasoning_effort)
  // and continue_last; earlier turns are shaped the way the template reads them
  // (engine/prompt_render.h).
  PreparedPrompt prepare(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                         const PromptControls& controls) const;
  PreparedPrompt prepare(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                         bool enable_thinking, bool continue_last = false) const {
    return prepare(messages, tools, PromptControls{enable_thinking, std::nullopt, continue_last});
  }

 private:
  ModelWeights weights_;
  std::string name_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Transformer> transformer_;
  std::optional<text::Tokenizer> tokenizer_;
  std::vector<int32_t> ids_without_token_;
  mutable std::once_flag vocabulary_once_;
  mutable std::unique_ptr<constrain::Vocabulary> vocabulary_;
  std::optional<chat::ChatTemplate> template_;
  toolcall::ToolCallFormatInfo format_;
  std::string format_origin_;
  TemplateReading template_reading_;  // reasoning control and call format as the template renders them
};

}  // namespace keel
