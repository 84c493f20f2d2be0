#pragma once
// Streaming parser for one generated turn: decoded text goes in piece by piece while the model
// generates, and out come text, reasoning and tool calls in the order the model wrote them. The
// format (chosen from the chat template, format_detect.h) decides which markers open a call; a bare
// JSON object {"name": ..., "arguments"|"parameters": {...}} at the start of output or of a line is
// a call under every format. Results never depend on how the output was split into pieces: text is
// held only while it could still be the start of a marker or a call (docs/tool-calls.md).
// Threads: one OutputParser per generated turn, owned by its caller (ChatTurn, on the engine
// thread); not thread-safe. The free functions keep no state: any thread.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "keel/toolcall/format_detect.h"

namespace keel::toolcall {

struct ParsedCall {
  std::string name;
  nlohmann::ordered_json arguments;    // the arguments object, key order as the model wrote it
  bool arguments_are_strings = false;  // the format carries every value as text (XML-style params)
  std::string raw;                     // the call's exact text as the model wrote it, markers included
  std::string problem;                 // empty when it parsed; else why not ("arguments are not valid JSON: ...")
  bool truncated = false;              // output ended inside the call (max_tokens): problem says so
};

struct ParseEvent {
  enum class Kind { Text, Reasoning, Call };
  Kind kind;
  std::string text;  // Text / Reasoning delta
  ParsedCall call;   // Kind::Call
};

class OutputParser {  // one per generated turn
 public:
  virtual ~OutputParser() = default;
  // Next piece of decoded output (any split, even inside a UTF-8 char or a marker). Appends events.
  // Text is released as soon as it can no longer be the start of a marker / call.
  virtual void feed(std::string_view chunk, std::vector<ParseEvent>& events) = 0;
  // End of output: releases held text; an unfinished call becomes a Call with truncated = true.
  virtual void finish(std::vector<ParseEvent>& events) = 0;
  // The text fed so far ends inside a reasoning block (a budget can close it).
  virtual bool in_reasoning() const = 0;
  // The last bytes fed that no event has accounted for yet (text that could still open a marker
  // or a call, a call not yet complete): everything before them is decided for good.
  virtual size_t held_bytes() const = 0;
};

struct OutputParserOptions {
  ToolCallFormat format = ToolCallFormat::Hermes;
  bool reasoning = false;            // split <think>...</think> into Reasoning events
  bool starts_in_reasoning = false;  // the prompt already opened <think> (generation prompt ends with it)
};

// Formats without a parser of their own (None, Unrecognized, KimiK2, ...) still get the bare-JSON
// fallback and the reasoning splitter. starts_in_reasoning implies reasoning. gpt-oss (Harmony)
// always splits its analysis channel off as reasoning.
std::unique_ptr<OutputParser> make_output_parser(const OutputParserOptions& options);

// Joins adjacent Text deltas and adjacent Reasoning deltas, and drops empty ones: the form in
// which two feeds of the same output, split differently, must be identical.
std::vector<ParseEvent> coalesce_events(const std::vector<ParseEvent>& events);

// Parses a whole output at once (feed + finish): for tests, retries and non-streaming callers.
std::vector<ParseEvent> parse_output(const OutputParserOptions& options, std::string_view output);

}  // namespace keel::toolcall
