#include "keel/engine/prompt_render.h"

#include "keel/chat/system_fold.h"
#include "keel/engine/history_replay.h"
#include "keel/util/error.h"

namespace keel {
namespace {

// The template closes every message; to let the model continue the last one, cut the prompt right
// after that message's text (what transformers does for continue_final_message).
void cut_after_last_message(chat::RenderedPrompt& rendered, const nlohmann::ordered_json& messages) {
  const auto& last = messages.back();
  if (!last.contains("content") || !last["content"].is_string() || last["content"].get_ref<const std::string&>().empty())
    throw Error("the final assistant message to continue has no text");
  const std::string& content = last["content"].get_ref<const std::string&>();
  const size_t at = rendered.text.rfind(content);
  if (at == std::string::npos) throw Error("the chat template does not reproduce the final assistant message verbatim");
  const size_t end = at + content.size();
  rendered.text.resize(end);
  while (!rendered.spans.empty() && rendered.spans.back().begin >= end) rendered.spans.pop_back();
  if (!rendered.spans.empty()) rendered.spans.back().end = end;
}

}  // namespace

nlohmann::ordered_json template_kwargs(const TemplateReading& reading, const PromptControls& controls) {
  nlohmann::ordered_json kwargs = {{"add_generation_prompt", !controls.continue_last}};
  if (reading.reasoning.kind == toolcall::ReasoningKind::Switchable) kwargs["enable_thinking"] = controls.enable_thinking;
  // Only a level the client chose: otherwise the template's default ("medium" for gpt-oss) stands,
  // as it would under transformers.
  if (reading.reasoning.reads_effort && controls.reasoning_effort) kwargs["reasoning_effort"] = *controls.reasoning_effort;
  return kwargs;
}

chat::RenderedPrompt render_prompt(const chat::ChatTemplate& tmpl, const TemplateReading& reading,
                                   const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                   const PromptControls& controls) {
  const nlohmann::ordered_json history = replay_history(messages, reading.reasoning, reading.format);
  // Later system messages render in place where the template accepts them, else folded into a
  // user message (chat/system_fold.h).
  chat::RenderedPrompt rendered =
      chat::render_conversation(tmpl, history, tools, template_kwargs(reading, controls)).prompt;
  if (controls.continue_last) cut_after_last_message(rendered, history);
  return rendered;
}

}  // namespace keel
