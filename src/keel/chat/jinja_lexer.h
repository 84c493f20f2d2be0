#pragma once
// Splits template source into tokens with Hugging Face's environment settings applied:
// trim_blocks (the newline after a block or comment tag is dropped), lstrip_blocks (spaces and
// tabs before a block or comment tag on its own line are dropped), `-` and `+` whitespace
// control, raw blocks, and no trailing newline at the end of the template.
// A pure function of the source: any thread.
#include <string>
#include <string_view>
#include <vector>

namespace keel::jinja {

struct Token {
  enum class Type { Text, VariableBegin, VariableEnd, BlockBegin, BlockEnd, Name, String, Integer, Float, Operator, End };
  Type type;
  std::string value;  // text, name, decoded string literal, number or operator spelling
  int line;
};

// Throws keel::Error (TemplateSyntaxError) naming the line of the problem.
std::vector<Token> tokenize_template(std::string_view source);

}  // namespace keel::jinja
