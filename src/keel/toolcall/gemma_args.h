#pragma once
// Gemma 4 writes call arguments in its own notation, the one its chat template renders:
// {key:<|"|>text<|"|>,n:5,flag:true,list:[1,2],nested:{k:<|"|>v<|"|>}}. Keys are bare (or wrapped
// in <|"|> like strings), strings are wrapped in <|"|> and never escaped. This reads that notation
// into JSON, telling "not finished yet" apart from "not this notation" for the streaming parser.
// Ordinary JSON strings ("...") are accepted too, and an unquoted scalar that is not a number,
// true, false or null is read as a string.
// A pure function of the text: any thread.
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace keel::toolcall {

struct GemmaValue {
  enum class Status { Complete, Incomplete, Invalid };
  Status status;
  nlohmann::ordered_json value;
  size_t end;  // Complete: one past the value; Invalid: the offending byte
  std::string error;
};

inline constexpr std::string_view kGemmaQuote = "<|\"|>";

GemmaValue parse_gemma_value(std::string_view text, size_t pos);

}  // namespace keel::toolcall
