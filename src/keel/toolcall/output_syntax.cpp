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

}  // namespace keel::toolcall
