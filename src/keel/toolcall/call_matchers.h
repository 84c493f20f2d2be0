#pragma once
// The pieces the streaming engine (output_parser.cpp) is assembled from: for each format, the
// markers that may open something, and for each marker a matcher that looks at the text from the
// marker on and says whether it is a whole call yet. Matchers are pure functions of the text they
// see, which is what makes the parser's output independent of how the text was split: they
// answer NeedMore only while more text could change their answer, and never once eof is true.
// Matchers, helpers and the opener tables keep no state (openers_for builds a new list per call):
// any thread; the stream's state lives in the OutputParser that calls them.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "keel/toolcall/tool_call_parser.h"

namespace keel::toolcall::detail {

enum class Region { Text, Reasoning };

struct Match {
  enum class Status {
    NeedMore,  // cannot tell yet; hold the text from the marker on
    NotCall,   // not a call after all: `length` bytes are released as text unchanged
    Consumed,  // `length` bytes were syntax: the calls found (maybe none) are emitted
  };
  Status status = Status::NeedMore;
  size_t length = 0;
  std::vector<ParsedCall> calls;
  std::optional<Region> enter;  // Consumed: the region the text after it belongs to
};

// `at` starts at the marker (marker_size bytes, fully present); `eof` says no more text will come.
using Matcher = Match (*)(std::string_view at, size_t marker_size, bool eof);

struct Opener {
  enum class Where {
    Anywhere,
    LineStart,    // at the start of output or of a line, after optional spaces (bare JSON calls)
    OutputStart,  // only as the very first bytes (gpt-oss may open with " to=functions.NAME")
  };
  std::string_view marker;
  Matcher match;
  Where where = Where::Anywhere;
};

inline Match need_more() { return {}; }
inline Match not_call(size_t length) { return {Match::Status::NotCall, length, {}, std::nullopt}; }
inline Match consumed(size_t length, std::vector<ParsedCall> calls = {}, std::optional<Region> enter = std::nullopt) {
  return {Match::Status::Consumed, length, std::move(calls), enter};
}

// --- shared helpers (call_fields.cpp) ---

// A call from a JSON object {"name": ..., "arguments"|"parameters": {...}}; arguments given as a
// JSON string (OpenAI style) are parsed. nullopt when the object is not shaped like a call.
std::optional<ParsedCall> call_from_json_object(const nlohmann::ordered_json& object, bool inside_call_marker);
// Parses text the JSON scanner called complete; problem set when nlohmann still refuses it
// (invalid UTF-8, lone surrogates).
std::optional<nlohmann::ordered_json> parse_scanned_json(std::string_view text, std::string& problem);
// A call whose arguments are the JSON object in `text` (formats that name the tool outside the JSON).
ParsedCall call_with_json_arguments(std::string name, std::string_view arguments_text);
// The call cut off by the end of output: best-effort name, problem says it was truncated.
ParsedCall truncated_call(std::string_view raw, std::string name = "");
// The "name" value from the start of a JSON call that may be cut off.
std::string name_from_partial_json(std::string_view text);
// True when text[pos..] starts with `word`; `partial` is set when the text ends inside it.
bool starts_with_at(std::string_view text, size_t pos, std::string_view word, bool& partial);

// --- matchers, one file per family ---

// <tool_call> with a JSON body (Hermes) or <function=...> body (Qwen3-Coder); both formats take both.
Match match_tool_call_tag(std::string_view at, size_t marker_size, bool eof);
// Qwen3-Coder's <function=NAME>...</function> without the <tool_call> wrapper.
Match match_bare_xml_function(std::string_view at, size_t marker_size, bool eof);
// A JSON object at the start of output or of a line.
Match match_bare_json(std::string_view at, size_t marker_size, bool eof);
// Llama 3.x <|python_tag|>{...}
Match match_python_tag(std::string_view at, size_t marker_size, bool eof);
// Mistral [TOOL_CALLS][{...}, ...] and [TOOL_CALLS]NAME[CALL_ID]id[ARGS]{...}
Match match_mistral(std::string_view at, size_t marker_size, bool eof);
// DeepSeek <｜tool▁call▁begin｜> (V3 and V3.1 shapes)
Match match_deepseek_call(std::string_view at, size_t marker_size, bool eof);
// gpt-oss Harmony headers: <|start|>..., <|channel|>..., " to=..." at output start.
Match match_harmony_header(std::string_view at, size_t marker_size, bool eof);
// Gemma 4 <|tool_call>call:NAME{...}<tool_call|> and the collapsed <tool_call:NAME{...}
Match match_gemma_call(std::string_view at, size_t marker_size, bool eof);
Match match_gemma_collapsed_call(std::string_view at, size_t marker_size, bool eof);

// Markers that are pure syntax: consumed, nothing emitted.
Match match_syntax_marker(std::string_view at, size_t marker_size, bool eof);
Match match_enter_reasoning(std::string_view at, size_t marker_size, bool eof);
Match match_leave_reasoning(std::string_view at, size_t marker_size, bool eof);

// The openers active for a format in a region (format_openers.cpp).
std::vector<Opener> openers_for(ToolCallFormat format, Region region, bool reasoning);
// Bytes dropped right after a call or marker besides whitespace (Llama separates calls with ';').
std::string_view separators_for(ToolCallFormat format);

}  // namespace keel::toolcall::detail
