// The JSON-Schema-Test-Suite (npm json-schema-test-suite, pinned in tests/clients/package.json;
// its draft-04 files) against the grammar compiler and matcher (keel/constrain). Every schema of
// the keyword files keel supports is compiled; those it refuses, and those with keywords the
// grammar does not enforce (minLength, oneOf's exclusivity, ...), are counted and skipped. For
// the rest the matcher must accept each test's document, written as compact JSON, exactly when
// the suite says it is valid.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "client_support.h"
#include "keel/constrain/json_schema.h"
#include "keel/constrain/matcher.h"

namespace keel::test {
namespace {

using Json = nlohmann::ordered_json;

bool accepts(const constrain::Grammar& grammar, const std::string& text) {
  constrain::Matcher m(grammar);
  constrain::MatchState s = m.start();
  return m.advance(s, text) && m.accepting(s);
}

TEST(SchemaSuite, SupportedDraft4CasesAgreeWithTheGrammar) {
  const ClientInstall& install = client_install();
  if (!install.skip_reason.empty()) GTEST_SKIP() << install.skip_reason;
  ASSERT_TRUE(install.error.empty()) << install.error;
  const auto dir = install.node_modules / "json-schema-test-suite/tests/draft4";
  int compiled = 0, refused = 0, unenforced = 0, checked = 0;
  for (const char* file : {"type", "properties", "required", "additionalProperties", "enum", "items", "minItems",
                           "maxItems", "anyOf", "oneOf", "allOf", "ref", "definitions", "default"}) {
    std::ifstream in(dir / (std::string(file) + ".json"));
    ASSERT_TRUE(in) << dir / file;
    for (const Json& group : Json::parse(in)) {
      const std::string where = std::string(file) + ": " + group["description"].get<std::string>();
      constrain::Grammar grammar;
      try {
        grammar = constrain::compile_json_schema(group["schema"]);
      } catch (const constrain::SchemaError&) {
        ++refused;
        continue;
      }
      if (!grammar.unenforced.empty()) {
        ++unenforced;
        continue;
      }
      ++compiled;
      for (const Json& test : group["tests"]) {
        const std::string text = test["data"].dump();
        EXPECT_EQ(accepts(grammar, text), test["valid"].get<bool>())
            << where << " / " << test["description"].get<std::string>() << ": " << text;
        ++checked;
      }
    }
  }
  std::printf("draft-04 suite: %d schemas compiled (%d documents checked), %d refused, %d with unenforced keywords\n",
              compiled, checked, refused, unenforced);
  EXPECT_GE(compiled, 24);  // what keel compiles of these files today: a refusal more is a regression
  EXPECT_GE(checked, 100);
}

}  // namespace
}  // namespace keel::test
