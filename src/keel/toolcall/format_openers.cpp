// Which markers open something, per format and region. The markers are the ones the real chat
// templates (shared/fixtures/chat_templates) render around assistant calls and reasoning.
#include "keel/toolcall/call_matchers.h"

namespace keel::toolcall::detail {
namespace {

// Gemma's reasoning opens with "<|channel>thought\n": the channel name is syntax, not reasoning.
Match match_gemma_channel(std::string_view at, size_t marker_size, bool eof) {
  constexpr size_t kMaxChannelName = 32;
  constexpr std::string_view kCloseChannel = "<channel|>";
  // Decided within a fixed window, so more text never changes an answer already given.
  const size_t window_size = marker_size + kMaxChannelName + kCloseChannel.size();
  const std::string_view window = at.substr(0, window_size);
  const size_t nl = window.find('\n', marker_size);
  const size_t close = window.find(kCloseChannel, marker_size);
  if (close != std::string_view::npos && (nl == std::string_view::npos || close < nl)) {
    return consumed(close + kCloseChannel.size());  // an empty thought: still text after it
  }
  if (nl != std::string_view::npos && nl - marker_size <= kMaxChannelName) return consumed(nl + 1, {}, Region::Reasoning);
  if (nl != std::string_view::npos || at.size() >= window_size || eof) return consumed(marker_size, {}, Region::Reasoning);
  return need_more();
}

void add_reasoning_openers(ToolCallFormat format, std::vector<Opener>& out) {
  out.push_back({"<think>", match_enter_reasoning});
  if (format == ToolCallFormat::Gemma4) out.push_back({"<|channel>", match_gemma_channel});
  if (format == ToolCallFormat::Mistral) out.push_back({"[THINK]", match_enter_reasoning});
}

void add_reasoning_closers(ToolCallFormat format, std::vector<Opener>& out) {
  out.push_back({"</think>", match_leave_reasoning});
  if (format == ToolCallFormat::Gemma4) out.push_back({"<channel|>", match_leave_reasoning});
  if (format == ToolCallFormat::Mistral) out.push_back({"[/THINK]", match_leave_reasoning});
}

void add_harmony_headers(std::vector<Opener>& out) {
  out.push_back({"<|start|>", match_harmony_header});
  out.push_back({"<|channel|>", match_harmony_header});
  // Leading whitespace of the turn is dropped, so " to=functions.NAME" arrives as "to=...".
  out.push_back({"to=", match_harmony_header, Opener::Where::OutputStart});
}

}  // namespace

Match match_syntax_marker(std::string_view, size_t marker_size, bool) { return consumed(marker_size); }
Match match_enter_reasoning(std::string_view, size_t marker_size, bool) {
  return consumed(marker_size, {}, Region::Reasoning);
}
Match match_leave_reasoning(std::string_view, size_t marker_size, bool) { return consumed(marker_size, {}, Region::Text); }

std::vector<Opener> openers_for(ToolCallFormat format, Region region, bool reasoning) {
  std::vector<Opener> out;
  if (format == ToolCallFormat::Harmony) {
    // Harmony's analysis channel is reasoning whatever the options say: it is never for the user.
    add_harmony_headers(out);
    if (region == Region::Reasoning) {
      for (std::string_view end : {"<|end|>", "<|return|>", "<|call|>"}) out.push_back({end, match_leave_reasoning});
    } else {
      for (std::string_view end : {"<|end|>", "<|return|>", "<|call|>"}) out.push_back({end, match_syntax_marker});
      out.push_back({"{", match_bare_json, Opener::Where::LineStart});
    }
    return out;
  }
  if (region == Region::Reasoning) {
    add_reasoning_closers(format, out);
    return out;
  }
  if (reasoning) add_reasoning_openers(format, out);
  switch (format) {
    case ToolCallFormat::Hermes:
      out.push_back({"<tool_call>", match_tool_call_tag});
      break;
    case ToolCallFormat::Qwen3CoderXml:
      out.push_back({"<tool_call>", match_tool_call_tag});
      out.push_back({"<function=", match_bare_xml_function});
      break;
    case ToolCallFormat::Llama3Json:
      out.push_back({"<|python_tag|>", match_python_tag});
      break;
    case ToolCallFormat::Mistral:
      out.push_back({"[TOOL_CALLS]", match_mistral});
      break;
    case ToolCallFormat::DeepSeek:
      out.push_back({"<｜tool▁call▁begin｜>", match_deepseek_call});
      out.push_back({"<｜tool▁calls▁begin｜>", match_syntax_marker});
      out.push_back({"<｜tool▁calls▁end｜>", match_syntax_marker});
      break;
    case ToolCallFormat::Gemma4:
      out.push_back({"<|tool_call>", match_gemma_call});
      out.push_back({"<tool_call:", match_gemma_collapsed_call});
      break;
    default:
      break;  // no markers of its own: only bare JSON calls are caught
  }
  out.push_back({"{", match_bare_json, Opener::Where::LineStart});
  return out;
}

std::string_view separators_for(ToolCallFormat format) { return format == ToolCallFormat::Llama3Json ? ";" : ""; }

}  // namespace keel::toolcall::detail
