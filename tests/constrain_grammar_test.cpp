// The JSON Schema grammar and its byte matcher: what it accepts parses and validates, what a schema
// allows is reachable, what it cannot compile is refused by name, and no state is a dead end.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "keel/constrain/json_schema.h"
#include "keel/constrain/matcher.h"
#include "schema_corpus_support.h"

namespace keel::constrain {
namespace {

using Json = nlohmann::ordered_json;

bool matches(const Grammar& g, std::string_view text) {
  Matcher m(g);
  MatchState s = m.start();
  return m.advance(s, text) && m.accepting(s);
}

bool matches(const Json& schema, std::string_view text) { return matches(compile_json_schema(schema), text); }

TEST(ConstrainGrammar, ObjectsTakeDeclaredKeysInAnyOrderOnceAndNeedTheRequiredOnes) {
  const Json schema = Json::parse(R"({"type":"object","properties":{"command":{"type":"string"},
      "timeout":{"type":"integer"},"run_in_background":{"type":"boolean"}},
      "required":["command"],"additionalProperties":false})");
  EXPECT_TRUE(matches(schema, R"({"command":"ls -la"})"));
  EXPECT_TRUE(matches(schema, R"({"command": "ls", "timeout": 120})"));
  EXPECT_TRUE(matches(schema, R"({ "timeout" : 5 , "command" : "x", "run_in_background": true })"));
  EXPECT_TRUE(matches(schema, "{\n  \"command\": \"echo \\\"hi\\\" \\u00e9\"\n}"));
  EXPECT_FALSE(matches(schema, R"({})"));                               // required missing
  EXPECT_FALSE(matches(schema, R"({"timeout": 5})"));                   // required missing
  EXPECT_FALSE(matches(schema, R"({"command":"a","command":"b"})"));    // twice
  EXPECT_FALSE(matches(schema, R"({"command":"a","other":1})"));        // undeclared
  EXPECT_FALSE(matches(schema, R"({"command":1})"));                    // wrong type
  EXPECT_FALSE(matches(schema, R"({"command":"a","timeout":1.5})"));    // not an integer
  EXPECT_FALSE(matches(schema, R"({"command":"a\x01"})"));              // a control byte in a string
  EXPECT_FALSE(matches(schema, R"({"command":"\ud800"})"));             // an unpaired surrogate escape
  EXPECT_FALSE(matches(schema, "{\"command\":\"\xC0\xAF\"}"));          // overlong UTF-8
}

TEST(ConstrainGrammar, UndeclaredKeysFollowAdditionalProperties) {
  const Json open = Json::parse(R"({"type":"object","properties":{"a":{"type":"string"}}})");
  EXPECT_TRUE(matches(open, R"({"a":"x","ab":[1,{"k":null}],"b":true})"));
  EXPECT_TRUE(matches(open, R"({"\u0061b":1})"));
  const Json typed = Json::parse(R"({"type":"object","additionalProperties":{"type":"number"}})");
  EXPECT_TRUE(matches(typed, R"({"x":1,"y":-2.5e3})"));
  EXPECT_FALSE(matches(typed, R"({"x":"1"})"));
  const Json required_extra = Json::parse(R"({"type":"object","required":["id"],"additionalProperties":{"type":"integer"}})");
  EXPECT_TRUE(matches(required_extra, R"({"id":3})"));
  EXPECT_FALSE(matches(required_extra, R"({"other":3})"));
}

TEST(ConstrainGrammar, ValuesOfEveryKind) {
  EXPECT_TRUE(matches(Json::parse(R"({"enum":["red","green",3,null]})"), R"("green")"));
  EXPECT_TRUE(matches(Json::parse(R"({"enum":["red","green",3,null]})"), "3"));
  EXPECT_FALSE(matches(Json::parse(R"({"enum":["red","green"]})"), R"("blue")"));
  EXPECT_TRUE(matches(Json::parse(R"({"type":"string","enum":["a",1]})"), R"("a")"));
  EXPECT_FALSE(matches(Json::parse(R"({"type":"string","enum":["a",1]})"), "1"));
  EXPECT_TRUE(matches(Json::parse(R"({"const":{"k":[1,2]}})"), R"({"k":[1,2]})"));
  EXPECT_TRUE(matches(Json::parse(R"({"type":["string","null"]})"), "null"));
  EXPECT_TRUE(matches(Json::parse(R"({"type":"number"})"), "-0.5E+10"));
  EXPECT_FALSE(matches(Json::parse(R"({"type":"number"})"), "01"));
  EXPECT_FALSE(matches(Json::parse(R"({"type":"number"})"), "1."));
  EXPECT_TRUE(matches(Json::parse(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":2})"), "[1, 2]"));
  EXPECT_FALSE(matches(Json::parse(R"({"type":"array","items":{"type":"integer"},"minItems":1})"), "[]"));
  EXPECT_FALSE(matches(Json::parse(R"({"type":"array","maxItems":2})"), "[1,2,3]"));
  EXPECT_TRUE(matches(Json::parse(R"({"anyOf":[{"type":"integer"},{"type":"array","items":{"type":"string"}}]})"), R"(["a"])"));
  EXPECT_TRUE(matches(Json::parse("{}"), R"({"any":[true,false,null,"s",1.5,{}]})"));
  EXPECT_TRUE(matches(Json::parse("true"), "[]"));
}

// Raw text up to a terminator (Qwen3-Coder's XML parameter values): anything UTF-8, quotes,
// backslashes and newlines included, ends at the first whole terminator, however much of it came
// before; a partial terminator is text.
TEST(ConstrainGrammar, TextRunsToTheFirstWholeTerminator) {
  Grammar g;
  g.root = g.add_sequence({g.add_text("\n</parameter>"), g.add_literal("!")});
  EXPECT_TRUE(matches(g, "Paris\n</parameter>!"));
  EXPECT_TRUE(matches(g, "\n</parameter>!"));  // empty
  EXPECT_TRUE(matches(g, "a \"quoted\" \\path\n\tnext line\n</parameter>!"));
  EXPECT_TRUE(matches(g, "<a>\n</param>\n\n</parameter>!"));  // a partial terminator, then a newline starting it again
  EXPECT_TRUE(matches(g, "caf\xC3\xA9 \xF0\x9F\x99\x82\n</parameter>!"));
  EXPECT_FALSE(matches(g, "Paris\n</parameter>"));             // not complete without what follows
  EXPECT_FALSE(matches(g, "a\n</parameter>b\n</parameter>!"));  // the first terminator ends it
  EXPECT_FALSE(matches(g, "bad \xC3\n</parameter>!"));         // a UTF-8 sequence cut short
  EXPECT_FALSE(matches(g, "nul \x01\n</parameter>!"));
  EXPECT_FALSE(matches(g, "Paris</parameter>!"));                // the terminator's newline is part of it
}

TEST(ConstrainGrammar, RecursiveReferences) {
  const Json tree = Json::parse(R"({"$ref":"#/$defs/node","$defs":{"node":{"type":"object",
      "properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},
      "required":["name"],"additionalProperties":false}}})");
  EXPECT_TRUE(matches(tree, R"({"name":"a","children":[{"name":"b","children":[{"name":"c"}]}]})"));
  EXPECT_FALSE(matches(tree, R"({"name":"a","children":[{"children":[]}]})"));
  // JSON Pointer escapes in a reference: ~1 is '/', ~0 is '~' (and ~01 is "~1").
  const Json escaped = Json::parse(R"({"type":"object","properties":{"x":{"$ref":"#/$defs/a~1b"},
      "y":{"$ref":"#/$defs/c~0d"},"z":{"$ref":"#/$defs/e~01"}},"$defs":{"a/b":{"type":"integer"},
      "c~d":{"type":"string"},"e~1":{"type":"boolean"}}})");
  EXPECT_TRUE(matches(escaped, R"({"x":1,"y":"s","z":true})"));
  EXPECT_FALSE(matches(escaped, R"({"x":"1"})"));
  EXPECT_FALSE(matches(escaped, R"({"z":1})"));
}

TEST(ConstrainGrammar, RefusesWhatItCannotCompileNamingTheKeyword) {
  auto refusal = [](const char* schema) {
    try {
      compile_json_schema(Json::parse(schema), "response_format.json_schema.schema");
    } catch (const SchemaError& e) {
      return std::string(e.what());
    }
    return std::string("compiled");
  };
  EXPECT_NE(refusal(R"({"type":"object","properties":{"a":{"not":{"type":"string"}}}})").find("properties.a.not"), std::string::npos);
  EXPECT_NE(refusal(R"({"patternProperties":{"^x":{}}})").find("patternProperties"), std::string::npos);
  EXPECT_NE(refusal(R"({"allOf":[{"type":"object"},{"type":"string"}]})").find("allOf.1.type"), std::string::npos);
  EXPECT_EQ(refusal(R"({"allOf":[{"type":"object"},{"required":["a"]}]})"), "compiled");
  EXPECT_NE(refusal(R"({"$ref":"https://example.com/s.json"})").find("$ref"), std::string::npos);
  EXPECT_NE(refusal(R"({"$ref":"#/$defs/missing"})").find("does not resolve"), std::string::npos);
  EXPECT_NE(refusal(R"({"$ref":"#"})").find("cycle"), std::string::npos);
  EXPECT_NE(refusal("false").find("no value"), std::string::npos);
  EXPECT_NE(refusal(R"({"type":"array","minItems":3,"maxItems":1})").find("minItems"), std::string::npos);
  EXPECT_NE(refusal(R"({"type":"object","required":["a"],"additionalProperties":false})").find("\"a\""), std::string::npos);
  EXPECT_EQ(refusal(R"({"type":"string","minLength":1,"format":"uri"})"), "compiled");
  const Grammar g = compile_json_schema(Json::parse(R"({"type":"object","properties":{"n":{"type":"integer","minimum":0}}})"));
  ASSERT_EQ(g.unenforced.size(), 1u);
  EXPECT_EQ(g.unenforced[0], ".properties.n.minimum");
}

// A random walk through the grammar, preferring bytes that close things so documents stay short.
// Every state it reaches must allow a byte or be complete (no dead ends), and every document it
// ends must parse as JSON and satisfy the schema.
std::optional<std::string> random_document(const Matcher& m, std::mt19937& rng) {
  // Bytes worth trying first: JSON's syntax, digits, the letters of true/false/null and escapes,
  // and a few drawn at random (UTF-8 lead and continuation bytes among them).
  constexpr std::string_view kLikely = "\"}],:{[0123456789-.eE+tfnrulsabu\\ \n";
  MatchState s = m.start();
  std::string text;
  while (text.size() < 400) {
    std::vector<uint8_t> options;
    auto try_byte = [&](uint8_t b) {
      MatchState t = s;
      if (m.advance(t, b) && std::find(options.begin(), options.end(), b) == options.end()) options.push_back(b);
    };
    for (char c : kLikely) try_byte(static_cast<uint8_t>(c));
    for (int i = 0; i < 6; ++i) try_byte(static_cast<uint8_t>(0x20 + rng() % 0xE0));
    if (options.empty())
      for (int b = 0; b < 256; ++b) try_byte(static_cast<uint8_t>(b));
    const bool can_stop = m.accepting(s);
    EXPECT_TRUE(can_stop || !options.empty()) << "dead end after: " << text;
    if (options.empty() || (can_stop && rng() % 3 == 0)) return text;
    // Closing bytes are likely; other bytes are drawn evenly.
    std::vector<uint8_t> preferred;
    for (uint8_t b : options)
      if (std::string_view("\"}],0123456789tfn[{:").find(static_cast<char>(b)) != std::string_view::npos) preferred.push_back(b);
    const auto& pool = (!preferred.empty() && rng() % 4 != 0) ? preferred : options;
    const uint8_t b = pool[rng() % pool.size()];
    text.push_back(static_cast<char>(b));
    EXPECT_TRUE(m.advance(s, b));
  }
  return std::nullopt;
}

TEST(ConstrainGrammar, EveryAcceptedDocumentParsesAndValidatesOnTheCorpus) {
  std::mt19937 rng(7);
  size_t documents = 0;
  for (const test::CorpusSchema& entry : test::schema_corpus()) {
    SCOPED_TRACE(entry.label);
    const Grammar g = compile_json_schema(entry.schema);
    Matcher m(g);
    for (int i = 0; i < 12; ++i) {
      const std::optional<std::string> doc = random_document(m, rng);
      if (!doc) continue;
      ++documents;
      Json value;
      ASSERT_NO_THROW(value = Json::parse(*doc)) << *doc;
      EXPECT_EQ(test::schema_violation(entry.schema, value), "") << *doc;
    }
    for (const Json& valid : entry.valid) EXPECT_TRUE(matches(g, valid.dump())) << valid.dump();
    for (const Json& valid : entry.valid) EXPECT_TRUE(matches(g, valid.dump(2))) << valid.dump(2);
  }
  EXPECT_GT(documents, 100u);
}

}  // namespace
}  // namespace keel::constrain
