// The reference model's greedy answers in the golden session suite
// (shared/fixtures/golden/tiny-toolcaller.session.json) parse, streamed byte by byte, into exactly
// the content blocks the suite expects, and every call passes schema checking against the tools
// the request sent (Anthropic's input_schema shape).
#include <gtest/gtest.h>

#include "keel/toolcall/schema_check.h"
#include "keel/toolcall/tool_call_parser.h"
#include "test_support.h"

namespace {

using keel::toolcall::ParseEvent;
using nlohmann::ordered_json;

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r\n") - a + 1);
}

TEST(ToolcallGoldenSession, ReferenceAnswersParseIntoTheExpectedBlocks) {
  const auto path = keel::test::shared_dir() / "fixtures" / "golden" / "tiny-toolcaller.session.json";
  const ordered_json suite = ordered_json::parse(keel::test::read_text(path));
  ASSERT_EQ(suite["cases"].size(), 14u);
  for (const ordered_json& c : suite["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const std::string answer = c["reference_text"].get<std::string>();
    keel::toolcall::OutputParserOptions options;  // tiny-toolcaller's template is Hermes-style
    std::vector<ParseEvent> events;
    auto parser = keel::toolcall::make_output_parser(options);
    for (char ch : answer) parser->feed(std::string_view(&ch, 1), events);
    parser->finish(events);

    ordered_json blocks = ordered_json::array();
    for (const ParseEvent& e : keel::toolcall::coalesce_events(events)) {
      if (e.kind == ParseEvent::Kind::Text && !trim(e.text).empty()) {
        blocks.push_back({{"type", "text"}, {"text", trim(e.text)}});
      } else if (e.kind == ParseEvent::Kind::Call) {
        const auto checked = keel::toolcall::check_tool_call(e.call, c["request"]["tools"]);
        EXPECT_TRUE(checked.valid) << checked.reason;
        blocks.push_back({{"type", "tool_use"}, {"name", checked.name}, {"input", checked.arguments}});
      }
    }
    EXPECT_EQ(blocks, c["expected"]);
  }
}

}  // namespace
