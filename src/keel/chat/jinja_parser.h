#pragma once
// Turns the token stream into a syntax tree, following jinja2's grammar and operator precedence.
// Malformed templates raise keel::Error (TemplateSyntaxError) with the line; nesting depth is
// bounded so hostile input cannot exhaust the stack.
// A pure function of the source; the caller owns the tree it returns: any thread.
#include <string_view>

#include "keel/chat/jinja_ast.h"

namespace keel::jinja {

Body parse_template(std::string_view source);

}  // namespace keel::jinja
