#pragma once
// A request's conversation rendered through the model's chat template, before tokenization: the
// template variables a request controls (enable_thinking, reasoning_effort), earlier turns shaped
// the way the template reads them (history_replay.h), later system messages in place or folded
// (chat/system_fold.h), and the last message left open when the client prefilled it.
// ServedModel::prepare tokenizes what this returns; tests render real templates with it without
// loading a model. Pure function of its arguments, any thread (chat::ChatTemplate::render keeps
// its state per call).
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "keel/chat/chat_renderer.h"
#include "keel/toolcall/format_detect.h"

namespace keel {

// What a request asks of the prompt beyond its messages and tools.
struct PromptControls {
  // The template's enable_thinking, passed only to templates that switch reasoning on and off.
  bool enable_thinking = false;
  // "low" | "medium" | "high", passed as reasoning_effort only to templates that read it
  // (gpt-oss). nullopt: not passed, so the template's own default applies.
  std::optional<std::string> reasoning_effort;
  // Leave the last (assistant) message open for the model to continue instead of adding the
  // generation prompt.
  bool continue_last = false;
};

// What was read from the template when the model loaded.
struct TemplateReading {
  toolcall::ReasoningControl reasoning;
  // Detected from the template text; a --tool-call-format override does not change how the
  // template renders history.
  toolcall::ToolCallFormat format = toolcall::ToolCallFormat::None;
};

// The template variables for `controls` under `reading`.
nlohmann::ordered_json template_kwargs(const TemplateReading& reading, const PromptControls& controls);

// Throws keel::Error when the template raises, or when continue_last is set and the last message
// cannot be continued (no text, or the template does not reproduce it verbatim).
chat::RenderedPrompt render_prompt(const chat::ChatTemplate& tmpl, const TemplateReading& reading,
                                   const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                   const PromptControls& controls);

}  // namespace keel
