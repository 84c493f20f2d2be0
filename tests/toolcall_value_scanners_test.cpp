// The two value readers the streaming parsers stand on: the JSON extent scanner (complete /
// not finished yet / cannot be JSON) and the reader for Gemma 4's argument notation.
#include <gtest/gtest.h>

#include "keel/toolcall/gemma_args.h"
#include "keel/toolcall/json_scan.h"

namespace {

using keel::toolcall::GemmaValue;
using keel::toolcall::JsonScan;
using keel::toolcall::parse_gemma_value;
using keel::toolcall::scan_json_value;

TEST(ToolcallJsonScan, CompleteValueEndsAtItsLastByte) {
  const std::string text = R"(  {"a": "}\"]", "b": [1, -2.5e3, true, null, {}], "c": "\u00e9"}</tool_call>)";
  const JsonScan scan = scan_json_value(text, 0);
  ASSERT_EQ(scan.status, JsonScan::Status::Complete);
  EXPECT_EQ(text.substr(scan.end), "</tool_call>");
}

TEST(ToolcallJsonScan, EveryPrefixOfAValueIsIncomplete) {
  const std::string text = R"({"name": "f", "arguments": {"x": [1.5, "a\"b", false], "y": null}})";
  for (size_t n = 0; n < text.size(); ++n) {
    EXPECT_EQ(scan_json_value(text.substr(0, n), 0).status, JsonScan::Status::Incomplete) << text.substr(0, n);
  }
  EXPECT_EQ(scan_json_value(text, 0).status, JsonScan::Status::Complete);
}

TEST(ToolcallJsonScan, NumberAtTheEndMayStillGrow) {
  EXPECT_EQ(scan_json_value("12", 0).status, JsonScan::Status::Incomplete);
  const JsonScan scan = scan_json_value("12,", 0);
  EXPECT_EQ(scan.status, JsonScan::Status::Complete);
  EXPECT_EQ(scan.end, 2u);
}

TEST(ToolcallJsonScan, InvalidPointsAtTheOffendingByte) {
  struct Case {
    const char* text;
    size_t at;
  };
  const Case cases[] = {
      {R"({"a": 1}})", 0},  // complete before the stray brace: not an error
      {R"({"a" 1})", 5},     {R"({a: 1})", 1},        {R"({"a": tru})", 9},     {R"([1 2])", 3},
      {R"({"a": "\x"})", 8}, {"{\"a\": \"\n\"}", 7}, {R"({"a": 01})", 7},      {R"({"a": -})", 7},
      {R"({"a": [1}})", 8},
  };
  for (const Case& c : cases) {
    const JsonScan scan = scan_json_value(c.text, 0);
    if (c.at == 0) {
      EXPECT_EQ(scan.status, JsonScan::Status::Complete) << c.text;
      continue;
    }
    EXPECT_EQ(scan.status, JsonScan::Status::Invalid) << c.text;
    EXPECT_EQ(scan.end, c.at) << c.text;
    EXPECT_FALSE(scan.error.empty());
  }
}

TEST(ToolcallJsonScan, NestingIsBounded) {
  const std::string deep(100000, '[');
  const JsonScan scan = scan_json_value(deep, 0);
  EXPECT_EQ(scan.status, JsonScan::Status::Invalid);
  EXPECT_EQ(scan.end, keel::toolcall::kMaxJsonDepth);
}

TEST(ToolcallGemmaArgs, TemplateNotationToJson) {
  const std::string text = R"({city:<|"|>Oslo, "NO"<|"|>,days:[1,2],deep:{ok:true,none:null,r:-0.5},<|"|>q k<|"|>:"j\"s"}<tool_call|>)";
  const GemmaValue v = parse_gemma_value(text, 0);
  ASSERT_EQ(v.status, GemmaValue::Status::Complete) << v.error;
  EXPECT_EQ(v.value.dump(), R"({"city":"Oslo, \"NO\"","days":[1,2],"deep":{"ok":true,"none":null,"r":-0.5},"q k":"j\"s"})");
  EXPECT_EQ(text.substr(v.end), "<tool_call|>");
}

TEST(ToolcallGemmaArgs, UnquotedWordsAreStrings) {
  const GemmaValue v = parse_gemma_value("{path:/tmp/a.txt,n:3}", 0);
  ASSERT_EQ(v.status, GemmaValue::Status::Complete) << v.error;
  EXPECT_EQ(v.value.dump(), R"({"path":"/tmp/a.txt","n":3})");
}

TEST(ToolcallGemmaArgs, PrefixesAreIncompleteAndGarbageInvalid) {
  const std::string text = R"({a:<|"|>x}<|"|>,b:[1,{c:2}]})";
  for (size_t n = 0; n < text.size(); ++n) {
    EXPECT_EQ(parse_gemma_value(text.substr(0, n), 0).status, GemmaValue::Status::Incomplete) << text.substr(0, n);
  }
  EXPECT_EQ(parse_gemma_value("{a::1}", 0).status, GemmaValue::Status::Invalid);
  EXPECT_EQ(parse_gemma_value("{a:1 b:2}", 0).status, GemmaValue::Status::Invalid);
  EXPECT_EQ(parse_gemma_value(std::string(1000, '['), 0).status, GemmaValue::Status::Invalid);
}

}  // namespace
