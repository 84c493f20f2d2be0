#pragma once
// Which tool-call format a model writes, and how its reasoning is controlled, read from the text
// of its chat template. Both are gates for agent work: a model whose calls keel cannot parse is no
// use to a coding agent however well it scores, and one that always reasons spends every turn's
// budget on it. Detection looks for the markers a template renders around a call; the most
// specific format is tried first (Qwen3-Coder's XML also contains Hermes' <tool_call>).
// Constants and pure functions of the template text: any thread.
#include <string>
#include <string_view>

namespace keel::toolcall {

enum class ToolCallFormat {
  None,          // the template renders no tool calls at all
  Unrecognized,  // it renders tool calls, in a format not listed here
  // Formats keel parses (DESIGN.md, "Tool calls").
  Hermes,         // <tool_call>{"name": ..., "arguments": ...}</tool_call>  (Qwen2.5, Qwen3, Hermes, Granite 4)
  Qwen3CoderXml,  // <tool_call><function=NAME><parameter=P>v</parameter></function></tool_call>
  Mistral,        // [TOOL_CALLS][{"name": ..., "arguments": ...}]
  Llama3Json,     // <|python_tag|> or a bare {"name": ..., "parameters": ...} object
  DeepSeek,       // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME ```json ...```
  Harmony,        // gpt-oss: <|start|>assistant to=functions.NAME<|channel|>commentary ...
  Gemma4,         // <|tool_call>call:NAME{...}<tool_call|>
  // Formats recognized so a plan can name them, with no keel parser yet.
  KimiK2,          // <|tool_calls_section_begin|>
  DeepSeekDsml,    // DeepSeek-V3.2 <｜DSML｜function_calls>
  Glm,             // <tool_call>NAME<arg_key>..</arg_key><arg_value>..</arg_value>
  SeedOss,         // <seed:tool_call><function=...>
  MiniMaxM2,       // <minimax:tool_call><invoke name=...>
  Lfm2,            // <|tool_call_start|>[...]<|tool_call_end|>
  NemotronJson,    // <TOOLCALL>[...]</TOOLCALL>
  Apriel,          // <tool_calls>[...]</tool_calls>
  Apertus,         // <|tools_prefix|>[...]<|tools_suffix|>
  CommandR,        // Command R+ "Action: ```json" and R7B <|START_ACTION|>
  Granite3,        // <|tool_call|>[...]
  FireFunction,    // functools[...]
  FunctionaryV31,  // <function=NAME>{...}</function>
  FunctionaryV32,  // >>>NAME\n{...}
  Solar,           // <|tool_call:begin|>
  GigaChat,        // a "function call" role message
};

struct ToolCallFormatInfo {
  ToolCallFormat format;
  std::string_view name;    // "hermes", "qwen3-coder-xml", ...
  std::string_view marker;  // what identified it in the template
  bool keel_parses;
};

ToolCallFormatInfo detect_tool_call_format(std::string_view template_text);
ToolCallFormatInfo tool_call_format_info(ToolCallFormat format);
// A format keel parses, by its name ("hermes", "qwen3-coder-xml", ...), for --tool-call-format.
// Throws keel::Error listing the valid names.
ToolCallFormat parsed_tool_call_format_from_name(std::string_view name);
// "hermes: <tool_call> JSON (keel parses it)" / "none: no structured tool calls from this model".
std::string describe_tool_call_format(const ToolCallFormatInfo& info);

enum class ReasoningKind { None, Switchable, AlwaysOn };

struct ReasoningControl {
  ReasoningKind kind = ReasoningKind::None;
  std::string how;  // the switch ("enable_thinking"), or what shows reasoning is always on
  // The template reads a `reasoning_effort` variable (gpt-oss writes it as its "Reasoning: low|
  // medium|high" system line), so a request's effort level can be passed to it.
  bool reads_effort = false;
  // The assistant-message field the template reads earlier reasoning from: "reasoning_content"
  // (most templates), "thinking" (gpt-oss, LFM2.5), or empty when it reads neither. Requests carry
  // earlier reasoning as "reasoning_content"; ServedModel::prepare renames it to this field.
  std::string history_field;
};

ReasoningControl detect_reasoning_control(std::string_view template_text);
std::string_view reasoning_kind_name(ReasoningKind kind);  // "none", "switchable", "always on"
std::string describe_reasoning_control(const ReasoningControl& control);

}  // namespace keel::toolcall
