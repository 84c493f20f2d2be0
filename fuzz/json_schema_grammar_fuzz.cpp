// Fuzz target: the JSON Schema compiler and the byte matcher (keel/constrain). The input is a
// schema on its first line and bytes after it; a first line that is not JSON leaves a fixed schema
// in force, and the whole input becomes the bytes. An input that starts with "G:" compiles the
// schema in Gemma 4's call syntax (bare keys, <|"|>-quoted raw strings) instead of JSON. The
// compiler must either refuse the schema with a SchemaError or build a grammar; the matcher then
// reads the bytes twice:
//   - as they are: whatever it accepts as complete must parse (as JSON, or as Gemma 4's
//     arguments are parsed: toolcall/gemma_args.h);
//   - as choices: each byte picks a byte the state allows, so the walk goes deep into the grammar;
//     no state it reaches may be a dead end (nothing allowed and not complete).
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "keel/constrain/json_schema.h"
#include "keel/constrain/matcher.h"
#include "keel/toolcall/gemma_args.h"
#include "keel/toolcall/json_scan.h"
#include "limited_json.h"

namespace {

using nlohmann::ordered_json;
using namespace keel::constrain;

const ordered_json& fixed_schema() {
  static const ordered_json schema = ordered_json::parse(R"({"type":"object","properties":{
    "path":{"type":"string"},"line":{"type":"integer"},"mode":{"enum":["a","b",3,null]},
    "ratio":{"type":["number","null"]},"tags":{"type":"array","items":{"type":"string"},"maxItems":3},
    "opts":{"$ref":"#/$defs/opts"}},"required":["path"],
    "$defs":{"opts":{"type":"object","properties":{"x":{"type":"boolean"},"next":{"$ref":"#/$defs/opts"}}}}})");
  return schema;
}


void check_complete_parses(const std::string& text, ValueSyntax syntax) {
  if (syntax == ValueSyntax::Gemma) {
    // A scalar runs to a delimiter: the space stands for what follows the value in a call.
    const auto read = keel::toolcall::parse_gemma_value(text + " ", 0);
    if (read.status != keel::toolcall::GemmaValue::Status::Complete) std::abort();  // not readable as Gemma's
    return;
  }
  try {
    (void)ordered_json::parse(text);
  } catch (const ordered_json::exception&) {
    std::abort();  // the grammar accepted text that is not JSON
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const ValueSyntax syntax = input.starts_with("G:") ? ValueSyntax::Gemma : ValueSyntax::Json;
  if (syntax == ValueSyntax::Gemma) input.remove_prefix(2);
  const size_t newline = input.find('\n');
  ordered_json schema = fixed_schema();
  std::string_view bytes = input;
  if (newline != std::string_view::npos) {
    ordered_json parsed;
    if (keel::fuzz::parse_limited(input.substr(0, newline), parsed)) {
      schema = std::move(parsed);
      bytes = input.substr(newline + 1);
    }
  }
  Grammar grammar;
  grammar.syntax = syntax;
  try {
    grammar.root = add_json_schema(grammar, schema, "schema");
  } catch (const SchemaError&) {
    return 0;
  }
  const Matcher matcher(grammar);

  MatchState state = matcher.start();
  std::string text;
  for (char c : bytes) {
    if (!matcher.advance(state, static_cast<uint8_t>(c))) break;
    text.push_back(c);
    if (matcher.accepting(state)) check_complete_parses(text, syntax);
  }

  // Each input byte picks the first byte at or after it (cyclically) that the state allows: cheap
  // where much is allowed (inside a string), a full scan only where little is.
  state = matcher.start();
  text.clear();
  for (char c : bytes.substr(0, std::min<size_t>(bytes.size(), 96))) {
    bool found = false;
    for (int k = 0; k < 256 && !found; ++k) {
      const auto b = static_cast<uint8_t>(static_cast<uint8_t>(c) + k);
      MatchState next = state;
      if (matcher.advance(next, b)) {
        state = std::move(next);
        text.push_back(static_cast<char>(b));
        found = true;
      }
    }
    if (!found) {
      if (!matcher.accepting(state)) std::abort();  // a dead end
      break;
    }
  }
  if (matcher.accepting(state)) check_complete_parses(text, syntax);
  return 0;
}
