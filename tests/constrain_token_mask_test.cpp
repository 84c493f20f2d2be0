// Token masks over a real vocabulary (Qwen2.5's 151k tokens): the cached, trie-walked mask must
// equal the plain answer (feed each token's bytes to the matcher) at every step of a document.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "keel/constrain/json_schema.h"
#include "keel/constrain/token_mask.h"
#include "keel/text/tokenizer.h"
#include "test_support.h"

namespace keel::constrain {
namespace {

using Json = nlohmann::ordered_json;

const text::Tokenizer& qwen() {
  static const text::Tokenizer tok = text::Tokenizer::from_file(test::shared_dir() / "fixtures/tokenizers/qwen2.5");
  return tok;
}

const Vocabulary& qwen_vocabulary() {
  static const Vocabulary vocab(qwen(), 151936);  // Qwen2.5's output rows: padded past its tokens
  return vocab;
}

// Walks `document`'s tokens through a TokenConstraint and checks each step's mask against the
// plain answer for a sample of tokens: every one holding a byte of `syntax` and every 5th of the rest.
void check_masks_along(const std::shared_ptr<const Grammar>& grammar, const std::string& document,
                       std::string_view syntax = "\"{}[],:\\") {
  const Vocabulary& vocab = qwen_vocabulary();
  TokenConstraint constraint(grammar, vocab);
  Matcher plain(*grammar);
  MatchState state = plain.start();
  TokenSet allowed(vocab.rows());
  size_t checked = 0, allowed_seen = 0;
  for (int32_t id : qwen().encode(document)) {
    constraint.allowed(allowed);
    for (int32_t t = 0; t < static_cast<int32_t>(vocab.rows()); ++t) {
      const std::string_view bytes = vocab.bytes(t);
      if (t % 5 != 0 && bytes.find_first_of(syntax) == std::string_view::npos) continue;
      MatchState s = state;
      const bool expected = !bytes.empty() && plain.advance(s, bytes);
      ASSERT_EQ(allowed.test(t), expected) << "token " << t << " \"" << bytes << "\" after " << id;
      ++checked;
      allowed_seen += expected;
    }
    ASSERT_TRUE(allowed.test(id)) << "the document's own token " << id << " is masked";
    ASSERT_TRUE(constraint.accept(id));
    ASSERT_TRUE(plain.advance(state, vocab.bytes(id)));
  }
  EXPECT_TRUE(constraint.accepting());
  EXPECT_GT(allowed_seen, 0u);
  EXPECT_GT(checked, 10000u);
}

void check_masks_along(const Json& schema, const std::string& document) {
  check_masks_along(std::make_shared<const Grammar>(compile_json_schema(schema)), document);
}

TEST(ConstrainTokenMask, EqualsThePlainAnswerAlongAToolCall) {
  const Json schema = Json::parse(R"({"type":"object","properties":{"command":{"type":"string"},
      "timeout":{"type":"number"},"paths":{"type":"array","items":{"type":"string"},"maxItems":3},
      "mode":{"enum":["fast","safe"]}},"required":["command"],"additionalProperties":false})");
  check_masks_along(schema, R"({"command": "grep -rn \"TODO\" src/ | head -20\n", "timeout": 12.5, "paths": ["a.cpp", "b/c.h"], "mode": "safe"})");
}

TEST(ConstrainTokenMask, EqualsThePlainAnswerWithUndeclaredKeysAndUnicode) {
  const Json schema = Json::parse(R"({"type":"object","properties":{"title":{"type":"string"}},"required":["title"]})");
  check_masks_along(schema, "{\"title\": \"Caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80\", \"tags\": [1, true, null, {\"k\": -0.5e2}]}");
}

// Raw text up to a terminator (Qwen3-Coder's XML values), whose tokens run into and across the
// terminator, and Gemma 4's syntax (bare keys, <|"|>-quoted raw strings; spelled in bytes here).
TEST(ConstrainTokenMask, EqualsThePlainAnswerForRawTextAndGemmaSyntax) {
  auto xml = std::make_shared<Grammar>();
  xml->root = xml->add_sequence({xml->add_literal("<parameter=content>\n"), xml->add_text("\n</parameter>"),
                                 xml->add_literal("\n</function>")});
  check_masks_along(xml, "<parameter=content>\nint main() {\n  // </param>\n  return \"\\n\";\n}\n</parameter>\n</function>",
                    "<>/\n");
  auto gemma = std::make_shared<Grammar>();
  gemma->syntax = ValueSyntax::Gemma;
  gemma->root = add_json_schema(*gemma, Json::parse(R"({"type":"object","properties":{"command":{"type":"string"},
      "timeout":{"type":"integer"},"env":{"type":"object","additionalProperties":{"type":"string"}}},"required":["command"]})"),
                                "schema", UndeclaredKeys::Closed);
  check_masks_along(gemma, "{command:<|\"|>grep -rn \"x\" src/ | head<|\"|>,timeout:30,env:{HOME:<|\"|>/root<|\"|>}}", "<|\">{}:,");
}

TEST(ConstrainTokenMask, SpecialAndEmptyTokensAreNeverAllowed) {
  const auto grammar = std::make_shared<const Grammar>(compile_json_schema(Json::parse(R"({"type":"string"})")));
  TokenConstraint constraint(grammar, qwen_vocabulary());
  ASSERT_TRUE(constraint.accept_bytes("\"abc"));
  TokenSet allowed(qwen_vocabulary().rows());
  constraint.allowed(allowed);
  EXPECT_FALSE(allowed.test(*qwen().token_id("<|im_end|>")));
  EXPECT_FALSE(allowed.test(*qwen().token_id("<tool_call>")));
  EXPECT_FALSE(allowed.test(151935));  // a padding row past the tokenizer
  EXPECT_FALSE(allowed.test(*qwen().token_id("\",")));  // a string alone: nothing may follow its end
  EXPECT_TRUE(allowed.test(*qwen().token_id("\"")));
  EXPECT_GT(allowed.count(), 140000u);  // inside a string nearly every token is text
}

}  // namespace
}  // namespace keel::constrain
