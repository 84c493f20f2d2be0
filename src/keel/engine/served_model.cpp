#include "keel/engine/served_model.h"

#include "keel/arch/model_loader.h"
#include "keel/chat/system_fold.h"
#include "keel/chat/token_roles.h"
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

ServedModel::ServedModel(const ServedModelOptions& options)
    : weights_(arch::load_model(std::filesystem::weakly_canonical(options.dir))), format_(toolcall::tool_call_format_info(toolcall::ToolCallFormat::None)) {
  pool_ = std::make_unique<ThreadPool>(options.threads);
  transformer_ = std::make_unique<Transformer>(weights_, *pool_);
  if (!std::filesystem::exists(weights_.dir / "tokenizer.json"))
    throw Error(weights_.dir.string() + ": no tokenizer.json; keel serve needs the model's tokenizer");
  tokenizer_ = text::Tokenizer::from_file(weights_.dir);
  chat::ChatTemplateSource source = chat::load_chat_template_source(weights_.dir, /*want_tools=*/true);
  template_.emplace(source.source, source.bos_token, source.eos_token);

  reasoning_ = toolcall::detect_reasoning_control(source.source);
  if (options.tool_call_format) {
    format_ = toolcall::tool_call_format_info(*options.tool_call_format);
    format_origin_ = "set by --tool-call-format";
  } else {
    format_ = toolcall::detect_tool_call_format(source.source);
    format_origin_ = format_.marker.empty() ? "no call markers in the chat template"
                                            : "from \"" + std::string(format_.marker) + "\" in chat template";
  }
}

PreparedPrompt ServedModel::prepare(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                    bool enable_thinking, bool continue_last) const {
  nlohmann::ordered_json kwargs = {{"add_generation_prompt", !continue_last}};
  if (reasoning_.kind == toolcall::ReasoningKind::Switchable) kwargs["enable_thinking"] = enable_thinking;
  // Later system messages render in place where the template accepts them, else folded into a
  // user message (chat/system_fold.h).
  chat::RenderedPrompt rendered = chat::render_conversation(*template_, messages, tools, kwargs).prompt;
  if (continue_last) cut_after_last_message(rendered, messages);
  PreparedPrompt p;
  // Client-written text never becomes control tokens: special tokens match only in the
  // template's own markup.
  p.ids = chat::encode_rendered_prompt(*tokenizer_, rendered.text, rendered.spans);
  if (p.ids.empty()) throw Error("the rendered prompt is empty");
  p.roles = chat::token_roles(*tokenizer_, p.ids, rendered.spans);
  // Templates of always-on (and switched-on) reasoning models open the block themselves.
  std::string_view text = rendered.text;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  p.starts_in_reasoning = text.ends_with("<think>");
  return p;
}

}  // namespace keel
