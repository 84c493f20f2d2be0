#include "keel/toolcall/format_detect.h"

#include "keel/util/error.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <vector>

namespace keel::toolcall {
namespace {

struct Rule {
  ToolCallFormat format;
  std::array<std::string_view, 3> all_of;  // every non-empty marker must appear
};

// Most specific first: a format whose markers contain another's must be tried before it.
constexpr Rule kRules[] = {
    {ToolCallFormat::Harmony, {"<|channel|>", " to=", "functions."}},
    {ToolCallFormat::DeepSeek, {"<｜tool▁calls▁begin｜>"}},
    {ToolCallFormat::DeepSeekDsml, {"｜DSML｜"}},
    {ToolCallFormat::KimiK2, {"<|tool_calls_section_begin|>"}},
    {ToolCallFormat::Gemma4, {"<|tool_call>"}},
    {ToolCallFormat::SeedOss, {"<seed:tool_call>"}},
    {ToolCallFormat::MiniMaxM2, {"<minimax:tool_call>"}},
    {ToolCallFormat::Qwen3CoderXml, {"<tool_call>", "<function=", "<parameter="}},
    {ToolCallFormat::Glm, {"<tool_call>", "<arg_key>"}},
    {ToolCallFormat::Apriel, {"<tool_calls>["}},
    {ToolCallFormat::Hermes, {"<tool_call>"}},
    {ToolCallFormat::Lfm2, {"<|tool_call_start|>"}},
    {ToolCallFormat::NemotronJson, {"<TOOLCALL>"}},
    {ToolCallFormat::Mistral, {"[TOOL_CALLS]"}},
    {ToolCallFormat::Apertus, {"<|tools_prefix|>"}},
    {ToolCallFormat::CommandR, {"<|START_ACTION|>"}},
    {ToolCallFormat::CommandR, {"Action:", "```json"}},
    {ToolCallFormat::Granite3, {"<|tool_call|>"}},
    {ToolCallFormat::FireFunction, {"functools["}},
    {ToolCallFormat::FunctionaryV31, {"<function=", "<|python_tag|>"}},
    {ToolCallFormat::FunctionaryV32, {">>>", "<|start_header_id|>"}},
    {ToolCallFormat::Llama3Json, {"<|python_tag|>"}},
    {ToolCallFormat::Llama3Json, {"<|start_header_id|>", "\"parameters\""}},
    {ToolCallFormat::Solar, {"<|tool_call:begin|>"}},
    {ToolCallFormat::GigaChat, {"function call"}},
};

bool matches(const Rule& rule, std::string_view text) {
  for (std::string_view m : rule.all_of) {
    if (!m.empty() && text.find(m) == std::string_view::npos) return false;
  }
  return true;
}

// The template split the way a reader sees it: the code inside {% %} and {{ }} as tokens (so a
// word in prose or in a quoted string is never mistaken for a variable), and the text the template
// can write out (raw text, string literals inside {{ }}, and `{% set name = 'literal' %}`).
enum class TokenKind { Identifier, String, Punct };

struct Token {
  std::string_view text;  // for strings, the contents without quotes
  TokenKind kind;
};

struct ScannedTemplate {
  std::vector<Token> code;
  std::string written;
};

std::vector<Token> tokenize_block(std::string_view b) {
  std::vector<Token> tokens;
  size_t i = 0;
  while (i < b.size()) {
    const char c = b[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '\'' || c == '"') {
      size_t start = ++i;
      while (i < b.size() && b[i] != c) i += (b[i] == '\\') ? 2 : 1;
      tokens.push_back({b.substr(start, std::min(i, b.size()) - start), TokenKind::String});
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t start = i;
      while (i < b.size() && (std::isalnum(static_cast<unsigned char>(b[i])) || b[i] == '_')) ++i;
      tokens.push_back({b.substr(start, i - start), TokenKind::Identifier});
    } else if ((c == '=' || c == '!' || c == '<' || c == '>') && i + 1 < b.size() && b[i + 1] == '=') {
      tokens.push_back({b.substr(i, 2), TokenKind::Punct});
      i += 2;
    } else {
      tokens.push_back({b.substr(i, 1), TokenKind::Punct});
      ++i;
    }
  }
  // Whitespace control ({%- ... -%}) is not code.
  while (!tokens.empty() && (tokens.front().text == "-" || tokens.front().text == "+")) tokens.erase(tokens.begin());
  while (!tokens.empty() && (tokens.back().text == "-" || tokens.back().text == "+")) tokens.pop_back();
  return tokens;
}

// Finds the end of a block that opened at `from`, skipping string literals that might hold the
// closing delimiter.
size_t block_end(std::string_view t, size_t from, std::string_view close) {
  size_t i = from;
  while (i + 1 < t.size()) {
    if (t[i] == '\'' || t[i] == '"') {
      const char q = t[i++];
      while (i < t.size() && t[i] != q) i += (t[i] == '\\') ? 2 : 1;
      ++i;
    } else if (t.substr(i, close.size()) == close) {
      return i;
    } else {
      ++i;
    }
  }
  return t.size();
}

ScannedTemplate scan_template(std::string_view t) {
  ScannedTemplate s;
  size_t pos = 0;
  while (pos < t.size()) {
    size_t open = t.find('{', pos);
    while (open != std::string_view::npos && open + 1 < t.size() && t[open + 1] != '%' && t[open + 1] != '{' &&
           t[open + 1] != '#') {
      open = t.find('{', open + 1);
    }
    if (open == std::string_view::npos || open + 1 >= t.size()) {
      s.written += t.substr(pos);
      break;
    }
    s.written += t.substr(pos, open - pos);
    const char kind = t[open + 1];
    if (kind == '#') {
      size_t end = t.find("#}", open + 2);
      pos = end == std::string_view::npos ? t.size() : end + 2;
      continue;
    }
    const size_t end = block_end(t, open + 2, kind == '%' ? "%}" : "}}");
    std::vector<Token> tokens = tokenize_block(t.substr(open + 2, end - open - 2));
    const bool literal_set = tokens.size() == 4 && tokens[0].text == "set" && tokens[2].text == "=" &&
                             tokens[3].kind == TokenKind::String;
    for (const Token& tok : tokens) {
      if (tok.kind == TokenKind::String && (kind == '{' || literal_set)) s.written += std::string(tok.text) + "\n";
    }
    s.code.insert(s.code.end(), tokens.begin(), tokens.end());
    pos = end + 2;
  }
  return s;
}

// True when the template reads `name` as a variable passed in by the caller: not an attribute
// (message.thinking), not an assignment target (set x = ...), not a keyword argument
// (namespace(enable_thinking=true)).
bool reads_variable(const std::vector<Token>& tokens, std::string_view name) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].kind != TokenKind::Identifier || tokens[i].text != name) continue;
    if (i > 0 && (tokens[i - 1].text == "." || tokens[i - 1].text == "set")) continue;
    if (i + 1 < tokens.size() && tokens[i + 1].text == "=") continue;
    return true;
  }
  return false;
}

// True when the template reads `name` as a field of some object: `x.name`, `x['name']` or
// `'name' in x`.
bool reads_field(const std::vector<Token>& tokens, std::string_view name) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].text != name) continue;
    const bool prev_dot = i > 0 && tokens[i - 1].text == ".";
    const bool prev_bracket = i > 0 && tokens[i - 1].text == "[";
    const bool next_in = i + 1 < tokens.size() && tokens[i + 1].text == "in";
    if (tokens[i].kind == TokenKind::Identifier && prev_dot) return true;
    if (tokens[i].kind == TokenKind::String && (prev_bracket || next_in)) return true;
  }
  return false;
}

// How reasoning is switched; what else the template reads is filled in by the caller.
ReasoningControl reasoning(ReasoningKind kind, std::string how) {
  ReasoningControl c;
  c.kind = kind;
  c.how = std::move(how);
  return c;
}

ReasoningControl classify_reasoning(std::string_view text, const ScannedTemplate& scanned) {
  const std::vector<Token>& code = scanned.code;
  if (reads_variable(code, "enable_thinking")) return reasoning(ReasoningKind::Switchable, "enable_thinking");
  if (reads_variable(code, "thinking_budget")) return reasoning(ReasoningKind::Switchable, "thinking_budget (0 turns it off)");
  if (reads_variable(code, "thinking")) return reasoning(ReasoningKind::Switchable, "thinking");
  if (text.find("/no_think") != std::string_view::npos) {
    return reasoning(ReasoningKind::Switchable, "/think or /no_think in the system prompt");
  }
  if (reads_variable(code, "reasoning_effort")) {
    return reasoning(ReasoningKind::AlwaysOn, "reasoning_effort sets how much, it cannot be turned off");
  }
  // Only markers the template writes count: a template that merely strips old </think> blocks
  // from history belongs to a model that does not reason.
  for (std::string_view marker : {"<think>", "</think>", "<seed:think>", "[THINK]", "<thinking>",
                                  "<|START_THINKING|>", "[BEGIN FINAL RESPONSE]"}) {
    if (scanned.written.find(marker) != std::string::npos) {
      return reasoning(ReasoningKind::AlwaysOn, "the template writes " + std::string(marker) + " with no switch");
    }
  }
  return reasoning(ReasoningKind::None, "");
}

}  // namespace

ToolCallFormatInfo tool_call_format_info(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::None: return {f, "none", "", false};
    case ToolCallFormat::Unrecognized: return {f, "unrecognized", "", false};
    case ToolCallFormat::Hermes: return {f, "hermes", "<tool_call>", true};
    case ToolCallFormat::Qwen3CoderXml: return {f, "qwen3-coder-xml", "<function=", true};
    case ToolCallFormat::Mistral: return {f, "mistral", "[TOOL_CALLS]", true};
    case ToolCallFormat::Llama3Json: return {f, "llama3-json", "<|python_tag|> / \"parameters\"", true};
    case ToolCallFormat::DeepSeek: return {f, "deepseek", "<｜tool▁calls▁begin｜>", true};
    case ToolCallFormat::Harmony: return {f, "harmony", "to=functions.", true};
    case ToolCallFormat::Gemma4: return {f, "gemma4", "<|tool_call>", true};
    case ToolCallFormat::KimiK2: return {f, "kimi-k2", "<|tool_calls_section_begin|>", false};
    case ToolCallFormat::DeepSeekDsml: return {f, "deepseek-dsml", "<｜DSML｜function_calls>", false};
    case ToolCallFormat::Glm: return {f, "glm", "<tool_call> with <arg_key>", false};
    case ToolCallFormat::SeedOss: return {f, "seed-oss", "<seed:tool_call>", false};
    case ToolCallFormat::MiniMaxM2: return {f, "minimax-m2", "<minimax:tool_call>", false};
    case ToolCallFormat::Lfm2: return {f, "lfm2", "<|tool_call_start|>", false};
    case ToolCallFormat::NemotronJson: return {f, "nemotron-toolcall", "<TOOLCALL>", false};
    case ToolCallFormat::Apriel: return {f, "apriel", "<tool_calls>", false};
    case ToolCallFormat::Apertus: return {f, "apertus", "<|tools_prefix|>", false};
    case ToolCallFormat::CommandR: return {f, "command-r", "Action: / <|START_ACTION|>", false};
    case ToolCallFormat::Granite3: return {f, "granite3", "<|tool_call|>", false};
    case ToolCallFormat::FireFunction: return {f, "firefunction", "functools[", false};
    case ToolCallFormat::FunctionaryV31: return {f, "functionary-v3.1", "<function=NAME>", false};
    case ToolCallFormat::FunctionaryV32: return {f, "functionary-v3.2", ">>>NAME", false};
    case ToolCallFormat::Solar: return {f, "solar", "<|tool_call:begin|>", false};
    case ToolCallFormat::GigaChat: return {f, "gigachat", "function call role", false};
  }
  return {f, "?", "", false};
}

ToolCallFormatInfo detect_tool_call_format(std::string_view text) {
  for (const Rule& rule : kRules) {
    if (matches(rule, text)) return tool_call_format_info(rule.format);
  }
  // The template handles assistant tool calls but writes them in no form listed above.
  if (text.find("tool_calls") != std::string_view::npos) return tool_call_format_info(ToolCallFormat::Unrecognized);
  return tool_call_format_info(ToolCallFormat::None);
}

ToolCallFormat parsed_tool_call_format_from_name(std::string_view name) {
  constexpr ToolCallFormat kParsed[] = {ToolCallFormat::Hermes,   ToolCallFormat::Qwen3CoderXml, ToolCallFormat::Mistral,
                                        ToolCallFormat::Llama3Json, ToolCallFormat::DeepSeek,    ToolCallFormat::Harmony,
                                        ToolCallFormat::Gemma4};
  std::string valid;
  for (ToolCallFormat f : kParsed) {
    const ToolCallFormatInfo info = tool_call_format_info(f);
    if (info.name == name) return f;
    valid += (valid.empty() ? "" : ", ") + std::string(info.name);
  }
  throw Error("unknown tool-call format '" + std::string(name) + "' (valid: " + valid + ")");
}

std::string describe_tool_call_format(const ToolCallFormatInfo& info) {
  switch (info.format) {
    case ToolCallFormat::None:
      return "none: no structured tool calls from this model";
    case ToolCallFormat::Unrecognized:
      return "unrecognized: the template renders tool calls in a format keel does not know; only bare JSON calls "
             "would be caught";
    default:
      break;
  }
  std::string out = std::string(info.name) + " (" + std::string(info.marker) + ")";
  if (info.keel_parses) return out + ": keel parses it";
  return out + ": recognized, but keel has no parser for it yet; only bare JSON calls would be caught";
}

ReasoningControl detect_reasoning_control(std::string_view text) {
  const ScannedTemplate scanned = scan_template(text);
  ReasoningControl c = classify_reasoning(text, scanned);
  c.reads_effort = reads_variable(scanned.code, "reasoning_effort");
  // reasoning_content is what requests carry; only a template that never reads it and reads
  // `thinking` instead (gpt-oss) needs it renamed.
  if (reads_field(scanned.code, "reasoning_content")) c.history_field = "reasoning_content";
  else if (reads_field(scanned.code, "thinking")) c.history_field = "thinking";
  return c;
}

std::string_view reasoning_kind_name(ReasoningKind kind) {
  switch (kind) {
    case ReasoningKind::None: return "none";
    case ReasoningKind::Switchable: return "switchable";
    case ReasoningKind::AlwaysOn: return "always on";
  }
  return "?";
}

std::string describe_reasoning_control(const ReasoningControl& c) {
  switch (c.kind) {
    case ReasoningKind::None: return "none: the template shows no reasoning";
    case ReasoningKind::Switchable: return "switchable via " + c.how;
    case ReasoningKind::AlwaysOn: return "always on: " + c.how;
  }
  return "?";
}

}  // namespace keel::toolcall
