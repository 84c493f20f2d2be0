#include "keel/engine/served_model.h"

#include "keel/arch/model_loader.h"
#include "keel/constrain/token_mask.h"
#include "keel/chat/token_roles.h"
#include "keel/engine/model_text.h"
#include "keel/util/error.h"

namespace keel {

ServedModel::ServedModel(const arch::ModelSource& model, const ServedModelOptions& options)
    : weights_(arch::load_model(model)), name_(model.name()), format_(toolcall::tool_call_format_info(toolcall::ToolCallFormat::None)) {
  pool_ = std::make_unique<ThreadPool>(options.threads);
  transformer_ = std::make_unique<Transformer>(weights_, *pool_);
  tokenizer_ = load_model_tokenizer(model);
  ids_without_token_ = keel::ids_without_token(*tokenizer_, weights_.spec.vocab_size);
  const chat::ChatTemplateSource& source = model.require_chat_template();
  template_.emplace(source.source, source.bos_token, source.eos_token);

  template_reading_.reasoning = toolcall::detect_reasoning_control(source.source);
  template_reading_.format = toolcall::detect_tool_call_format(source.source).format;
  if (options.tool_call_format) {
    format_ = toolcall::tool_call_format_info(*options.tool_call_format);
    format_origin_ = "set by --tool-call-format";
  } else {
    format_ = toolcall::tool_call_format_info(template_reading_.format);
    format_origin_ = format_.marker.empty() ? "no call markers in the chat template"
                                            : "from \"" + std::string(format_.marker) + "\" in chat template";
  }
}

PreparedPrompt ServedModel::prepare(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                    const PromptControls& controls) const {
  const chat::RenderedPrompt rendered = render_prompt(*template_, template_reading_, messages, tools, controls);
  PreparedPrompt p;
  // Client-written text never becomes control tokens: special tokens match only in the
  // template's own markup.
  p.ids = chat::encode_rendered_prompt(*tokenizer_, rendered.text, rendered.spans);
  if (p.ids.empty()) throw Error("the rendered prompt is empty");
  p.roles = chat::token_roles(*tokenizer_, p.ids, rendered.text, rendered.spans);
  // Templates of always-on (and switched-on) reasoning models open the block themselves.
  std::string_view text = rendered.text;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  p.starts_in_reasoning = text.ends_with("<think>");
  return p;
}

ServedModel::~ServedModel() = default;

const constrain::Vocabulary& ServedModel::vocabulary() const {
  std::call_once(vocabulary_once_, [&] {
    // Gemma 4's call arguments quote strings with a control token (output_constraint.h).
    std::vector<std::string_view> value_markup;
    if (tool_call_format().format == toolcall::ToolCallFormat::Gemma4) value_markup.push_back(constrain::kGemmaQuote);
    vocabulary_ = std::make_unique<constrain::Vocabulary>(*tokenizer_, static_cast<size_t>(weights_.spec.vocab_size),
                                                          value_markup);
  });
  return *vocabulary_;
}

}  // namespace keel
