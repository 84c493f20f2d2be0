#pragma once
// Schemas to test the constrained-output compiler on: the tool schemas real agent clients send
// (tests/data/tool_schemas, captured from the pinned clients), structured-output schemas of the
// kinds the OpenAI and Anthropic SDK guides show, and a reference validator for the subset the
// compiler supports, written independently of it.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace keel::test {

struct CorpusSchema {
  std::string label;               // "claude-code/Bash", "sdk/calendar_event", ...
  nlohmann::ordered_json schema;
  std::vector<nlohmann::ordered_json> valid;  // documents the schema allows (generated from it)
};

std::vector<CorpusSchema> schema_corpus();

// Why `value` does not satisfy `schema` (structural keywords, enum/const, min/maxItems, anyOf,
// $ref within the schema), or "" when it does.
std::string schema_violation(const nlohmann::ordered_json& schema, const nlohmann::ordered_json& value);

}  // namespace keel::test
