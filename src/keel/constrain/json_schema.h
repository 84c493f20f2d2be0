#pragma once
// JSON Schema to Grammar: the subset tools and response formats use. Every text the grammar
// accepts is one JSON value (compact or with bounded whitespace) that the schema's structural
// keywords allow:
//   type (one or a list), properties, required, additionalProperties (bool or schema), enum,
//   const, items, minItems, maxItems, anyOf, oneOf, allOf of one schema, nullable, $ref to
//   "#", "#/$defs/..." or "#/definitions/..." (recursion included), true/false schemas.
// Annotations (title, description, default, examples, format, ...) change nothing, as the
// specification says. Value keywords the grammar does not enforce (minLength, maxLength, pattern,
// minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf, uniqueItems, minProperties,
// maxProperties, oneOf's exclusivity) are listed in Grammar::unenforced: a caller that cannot
// check them afterwards refuses the schema. Anything else (not, if/then/else, patternProperties,
// prefixItems, ...) is refused with a SchemaError naming the keyword and where it is.
//
// Threads: pure functions of their arguments; any thread.
#include <string>

#include <nlohmann/json.hpp>

#include "keel/constrain/grammar.h"
#include "keel/util/error.h"

namespace keel::constrain {

class SchemaError : public Error {
 public:
  explicit SchemaError(const std::string& message) : Error(message) {}
};

// How an object without additionalProperties is read. The specification's default allows any
// undeclared key (Open); tool calls use Closed, as xgrammar's strict mode and OpenAI's strict
// tools do: a call's arguments are the declared ones, and a model cannot wander off into keys of
// its own that keep the call from ever closing.
enum class UndeclaredKeys { Open, Closed };

// A grammar whose root is `schema`'s value. `where` prefixes error messages ("response_format.
// json_schema.schema").
Grammar compile_json_schema(const nlohmann::ordered_json& schema, const std::string& where = "schema",
                            UndeclaredKeys undeclared = UndeclaredKeys::Open);

// Adds `schema`'s value to `grammar` (its $refs resolved within `schema`) and returns its node:
// for grammars that wrap several schemas in fixed text (tool calls).
uint32_t add_json_schema(Grammar& grammar, const nlohmann::ordered_json& schema, const std::string& where,
                         UndeclaredKeys undeclared = UndeclaredKeys::Open);

// An object with exactly these properties, all required, in any order: the fixed wrapper around
// a schema's value in a tool call ({"name": "Bash", "arguments": {...}}).
uint32_t add_closed_object(Grammar& grammar, const std::vector<std::pair<std::string, uint32_t>>& properties);

// A node for any JSON value at all (json_object's inner values, `true` schemas).
uint32_t add_any_json(Grammar& grammar);

}  // namespace keel::constrain
