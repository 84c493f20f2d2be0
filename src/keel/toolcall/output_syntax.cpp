#include "keel/toolcall/output_syntax.h"

#include <algorithm>
#include <initializer_list>

namespace keel::toolcall {
namespace {

bool listed(std::initializer_list<std::string_view> markers, std::string_view token) {
  return std::find(markers.begin(), markers.end(), token) != markers.end();
}

}  // namespace

bool is_output_syntax(ToolCallFormat format, std::string_view token) {
  // Reasoning markers are shared by every format that has a <think> block.
  if (listed({"<think>", "</think>"}, token)) return true;
  switch (format) {
    case ToolCallFormat::Hermes:
      return listed({"<tool_call>", "</tool_call>"}, token);
    case ToolCallFormat::Qwen3CoderXml:
      return listed({"<tool_call>", "</tool_call>", "</function>", "</parameter>"}, token);
    case ToolCallFormat::Mistral:
      return listed({"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "[THINK]", "[/THINK]"}, token);
    case ToolCallFormat::Llama3Json:
      return listed({"<|python_tag|>"}, token);
    case ToolCallFormat::DeepSeek:
      return listed({"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
                     "<｜tool▁sep｜>"},
                    token);
    case ToolCallFormat::Harmony:
      return listed({"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|end|>", "<|call|>", "<|return|>"},
                    token);
    case ToolCallFormat::Gemma4:
      return listed({"<|tool_call>", "<tool_call|>", "<|\"|>", "<|channel>", "<channel|>"}, token);
    default:
      return false;
  }
}

bool ends_turn(ToolCallFormat format, std::string_view token) {
  // gpt-oss's generation_config.json lists <|call|> among its eos ids in some releases and not in
  // others; the format is what says a turn ends there.
  return format == ToolCallFormat::Harmony && listed({"<|call|>", "<|return|>"}, token);
}

std::string_view reasoning_closer(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::Harmony: return {};
    case ToolCallFormat::Mistral: return "[/THINK]";
    case ToolCallFormat::Gemma4: return "<channel|>";
    default: return "\n</think>\n\n";
  }
}

std::string call_opener(ToolCallFormat format, std::string_view tool_name, bool after_output) {
  const std::string name(tool_name);
  // The markup each format's chat templates render around an assistant's call.
  switch (format) {
    case ToolCallFormat::Hermes:  // <tool_call>\n{"name": "NAME", "arguments": {...}}\n</tool_call>
      return name.empty() ? "<tool_call>\n" : "<tool_call>\n{\"name\": \"" + name + "\", \"arguments\":";
    case ToolCallFormat::Qwen3CoderXml:  // <tool_call>\n<function=NAME>\n<parameter=P>\n...
      return name.empty() ? "<tool_call>\n" : "<tool_call>\n<function=" + name + ">\n";
    case ToolCallFormat::Llama3Json:  // {"name": "NAME", "parameters": {...}}
      return name.empty() ? "{\"name\": \"" : "{\"name\": \"" + name + "\", \"parameters\":";
    case ToolCallFormat::Harmony: {  // <|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>{...}
      // The prompt ends with the header's "<|start|>assistant"; after an analysis message the
      // model starts the next one itself.
      const std::string header = std::string(after_output ? "<|start|>assistant" : "") + " to=functions.";
      return name.empty() ? header : header + name + "<|channel|>commentary json<|message|>";
    }
    case ToolCallFormat::Gemma4:  // <|tool_call>call:NAME{...}<tool_call|>
      return name.empty() ? "<|tool_call>call:" : "<|tool_call>call:" + name + "{";
    default:
      return {};
  }
}

}  // namespace keel::toolcall
