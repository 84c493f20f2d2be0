// Unit tests of the tokenizer pieces on small hand-written tokenizer.json files: SentencePiece-style
// BPE with byte fallback, added-token flags, Unicode normalization, UTF-8 handling and errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "keel/text/stream_decoder.h"
#include "keel/text/tokenizer.h"
#include "keel/text/unicode_normalization.h"
#include "keel/util/utf8.h"
#include "keel/util/error.h"
#include "test_support.h"

namespace {

using keel::text::Tokenizer;
using nlohmann::json;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

json added(int id, const std::string& content, bool special, json flags = json::object()) {
  json t = {{"id", id},          {"content", content}, {"special", special}, {"lstrip", false},
            {"rstrip", false},   {"single_word", false}, {"normalized", false}};
  t.update(flags);
  return t;
}

// Llama 2 / Mistral layout: "▁" marks word starts, unknown characters fall back to byte tokens.
json sentencepiece_json() {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  int next = 259;
  for (const char* t : {"▁", "H", "e", "l", "o", "w", "r", "d", "▁H", "▁He", "ll", "llo", "▁Hello", "▁w", "▁wor", "or",
                        "ld", "▁world"})
    vocab[t] = next++;
  json merges = json::array({{"▁", "H"}, {"▁H", "e"}, {"l", "l"}, {"ll", "o"}, {"▁He", "llo"}, {"▁", "w"}, {"o", "r"},
                             {"▁w", "or"}, {"l", "d"}, {"▁wor", "ld"}});
  return {{"added_tokens", {added(0, "<unk>", true), added(1, "<s>", true), added(2, "</s>", true)}},
          {"normalizer",
           {{"type", "Sequence"},
            {"normalizers",
             {{{"type", "Prepend"}, {"prepend", "▁"}},
              {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}}},
          {"pre_tokenizer", nullptr},
          {"decoder",
           {{"type", "Sequence"},
            {"decoders",
             {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
              {{"type", "ByteFallback"}},
              {{"type", "Fuse"}},
              {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
          {"model",
           {{"type", "BPE"},
            {"unk_token", "<unk>"},
            {"fuse_unk", true},
            {"byte_fallback", true},
            {"vocab", vocab},
            {"merges", merges}}}};
}

Tokenizer load(const json& j) { return Tokenizer::from_json_text(j.dump(), "test.json"); }

int32_t id_of(const Tokenizer& t, const std::string& token) {
  auto id = t.token_id(token);
  EXPECT_TRUE(id.has_value()) << token;
  return id.value_or(-1);
}

TEST(TokenizerSentencePiece, MergesWordsAndFallsBackToBytes) {
  auto tok = load(sentencepiece_json());
  EXPECT_THAT(tok.encode("Hello world"), ElementsAre(id_of(tok, "▁Hello"), id_of(tok, "▁world")));
  // "ü" is not in the vocabulary: its two UTF-8 bytes become <0xC3> <0xBC>.
  EXPECT_THAT(tok.encode("ü"), ElementsAre(id_of(tok, "▁"), id_of(tok, "<0xC3>"), id_of(tok, "<0xBC>")));
  EXPECT_EQ(tok.decode(tok.encode("Hello world")), "Hello world");
  EXPECT_EQ(tok.decode(tok.encode("über 🦙 world")), "über 🦙 world");
}

TEST(TokenizerSentencePiece, SpecialTokensAreMatchedOrNot) {
  auto tok = load(sentencepiece_json());
  EXPECT_THAT(tok.encode("<s>Hello"), ElementsAre(1, id_of(tok, "▁Hello")));
  auto as_text = tok.encode("<s>", /*parse_special=*/false);
  EXPECT_GT(as_text.size(), 1u);
  EXPECT_EQ(tok.decode(as_text), "<s>");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{1, id_of(tok, "▁Hello")}, /*skip_special=*/true), "Hello");
}

TEST(TokenizerSentencePiece, UnknownWithoutByteTokensFusesToOneUnk) {
  json j = sentencepiece_json();
  j["model"]["byte_fallback"] = false;
  auto tok = load(j);
  EXPECT_THAT(tok.encode("üü"), ElementsAre(id_of(tok, "▁"), 0));
}

TEST(TokenizerMetaspace, PrependsOnlyAtTextStartWithFirstScheme) {
  json j = sentencepiece_json();
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", true}};
  j["decoder"] = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", true}};
  auto tok = load(j);
  EXPECT_THAT(tok.encode("Hello world"), ElementsAre(id_of(tok, "▁Hello"), id_of(tok, "▁world")));
  // After an added token the text does not start the input, so no "▁" is prepended.
  auto ids = tok.encode("<s>Hello");
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], id_of(tok, "H"));
  EXPECT_EQ(tok.decode(tok.encode("Hello world")), "Hello world");
}

// A byte-level vocabulary holding only single bytes, plus added tokens with the given flags.
json byte_level_json(const json& added_tokens) {
  json vocab = json::object();
  for (int b = 0x21; b < 0x7F; ++b) vocab[std::string(1, static_cast<char>(b))] = b;
  vocab["Ġ"] = 0x20;
  vocab["Ċ"] = 0x0A;
  vocab["ĉ"] = 0x09;
  return {{"added_tokens", added_tokens},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}}};
}

TEST(TokenizerAddedTokens, LstripAndRstripSwallowWhitespace) {
  auto tok = load(byte_level_json(json::array({added(200, "<mask>", true, {{"lstrip", true}, {"rstrip", true}})})));
  EXPECT_THAT(tok.encode("a  <mask>  b"), ElementsAre('a', 200, 'b'));
  auto plain = load(byte_level_json(json::array({added(200, "<mask>", true)})));
  EXPECT_THAT(plain.encode("a <mask> b"), ElementsAre('a', 0x20, 200, 0x20, 'b'));
}

TEST(TokenizerAddedTokens, SingleWordOnlyMatchesWholeWords) {
  auto tok = load(byte_level_json(json::array({added(200, "cat", false, {{"single_word", true}})})));
  EXPECT_THAT(tok.encode("a cat"), ElementsAre('a', 0x20, 200));
  EXPECT_THAT(tok.encode("cats"), ElementsAre('c', 'a', 't', 's'));
}

TEST(TokenizerAddedTokens, LongestMatchWinsAndNonSpecialStaysMatched) {
  auto tok = load(byte_level_json({added(200, "<|a|>", true), added(201, "<|a|><|b|>", true),
                                   added(202, "<tool>", false)}));
  EXPECT_THAT(tok.encode("<|a|><|b|><|a|>"), ElementsAre(201, 200));
  auto ids = tok.encode("<|a|><tool>", /*parse_special=*/false);
  EXPECT_EQ(ids.back(), 202);
  EXPECT_EQ(ids.size(), 6u);  // "<|a|>" spelled out as five byte tokens
}

TEST(TokenizerNormalization, ComposesDecomposesAndReorders) {
  using keel::text::NormalizationForm;
  using keel::text::normalize_unicode;
  EXPECT_EQ(normalize_unicode("e\u0301", NormalizationForm::NFC), "\u00e9");
  EXPECT_EQ(normalize_unicode("\u00e9", NormalizationForm::NFD), "e\u0301");
  EXPECT_EQ(normalize_unicode("\ufb01", NormalizationForm::NFKC), "fi");
  EXPECT_EQ(normalize_unicode("\ufb01", NormalizationForm::NFC), "\ufb01");
  // Hangul: conjoining jamo compose into one syllable and back.
  EXPECT_EQ(normalize_unicode("\u1112\u1161\u11ab", NormalizationForm::NFC), "\ud55c");
  EXPECT_EQ(normalize_unicode("\ud55c", NormalizationForm::NFD), "\u1112\u1161\u11ab");
  // Marks are put in canonical order (dot below, class 220, before acute, class 230) and compose.
  EXPECT_EQ(normalize_unicode("q\u0301\u0323", NormalizationForm::NFD), "q\u0323\u0301");
  EXPECT_EQ(normalize_unicode("a\u0301\u0323", NormalizationForm::NFC), "\u1ea1\u0301");
  // Composition exclusions stay decomposed.
  EXPECT_EQ(normalize_unicode("\u0958", NormalizationForm::NFC), "\u0915\u093c");
}

// Regex classes follow Oniguruma, as in Hugging Face: \s is Unicode White_Space, so U+180E (which
// PCRE2's own \s would match) is not a space, and NFC runs before splitting. Expected ids come from
// Hugging Face tokenizers on the bundled tiny-toolcaller tokenizer.
TEST(TokenizerRegex, ClassesMatchHuggingFace) {
  auto tok = Tokenizer::from_file(keel::test::shared_dir() / "models" / "tiny-toolcaller");
  EXPECT_THAT(tok.encode("L\u180e've it"), ElementsAre(43, 157, 254, 236, 6, 460, 220, 72, 83));
  EXPECT_THAT(tok.encode("a\u0301\u0301 x"), ElementsAre(127, 94, 136, 223, 1105));
  EXPECT_THAT(tok.encode("x\u200b y\u00a0 z"), ElementsAre(87, 158, 222, 233, 647, 126, 254, 220, 89));
}

TEST(TokenizerUtf8, SanitizesAndFindsCompletePrefix) {
  namespace utf8 = keel::utf8;
  EXPECT_EQ(utf8::sanitize("a\xff" "b"), "a\ufffd" "b");
  EXPECT_EQ(utf8::sanitize("\xe4\xb8"), "\ufffd");
  EXPECT_EQ(utf8::sanitize("\xed\xa0\x80"), "\ufffd\ufffd\ufffd");  // a surrogate is ill-formed
  EXPECT_EQ(utf8::complete_prefix_length("ab\xe4\xb8"), 2u);
  EXPECT_EQ(utf8::complete_prefix_length("ab\xe4\xb8\xad"), 5u);
  EXPECT_EQ(utf8::complete_prefix_length("ab\xff"), 3u);
}

TEST(TokenizerEncode, InvalidUtf8InputIsReadAsReplacementCharacter) {
  auto tok = Tokenizer::from_file(keel::test::shared_dir() / "models" / "tiny-toolcaller");
  EXPECT_EQ(tok.decode(tok.encode("a\xff" "b")), "a\ufffd" "b");
}

// Feeding ids one at a time never yields part of a character, and the pieces add up to the text.
void expect_streams_cleanly(const Tokenizer& tok, const std::string& text) {
  auto ids = tok.encode(text);
  keel::text::StreamDecoder stream(tok);
  std::string joined;
  int held_back = 0;
  for (int32_t id : ids) {
    std::string piece = stream.feed(id);
    EXPECT_TRUE(keel::utf8::is_valid(piece)) << "partial character emitted";
    if (piece.empty()) ++held_back;
    joined += piece;
  }
  joined += stream.flush();
  EXPECT_EQ(joined, text);
  EXPECT_GT(held_back, 0) << "expected some character to span several tokens";
}

TEST(TokenizerStream, ByteLevelNeverEmitsPartialCharacters) {
  auto tok = Tokenizer::from_file(keel::test::shared_dir() / "models" / "tiny-toolcaller");
  expect_streams_cleanly(tok, "Emoji 🦙🔥 and 中文 and café\n<tool_call>{\"a\": 1}</tool_call>");
}

TEST(TokenizerStream, ByteFallbackNeverEmitsPartialCharacters) {
  expect_streams_cleanly(load(sentencepiece_json()), "Hello 🦙 world über");
}

TEST(TokenizerStream, FlushReplacesAnUnfinishedCharacter) {
  auto tok = load(sentencepiece_json());
  keel::text::StreamDecoder stream(tok);
  EXPECT_EQ(stream.feed(id_of(tok, "▁Hello")), "Hello");
  EXPECT_EQ(stream.feed(id_of(tok, "<0xE4>")), "");
  EXPECT_EQ(stream.flush(), "\ufffd");
}

TEST(TokenizerApi, LooksUpTokensAndIds) {
  auto tok = Tokenizer::from_file(keel::test::shared_dir() / "models" / "tiny-toolcaller" / "tokenizer.json");
  EXPECT_EQ(tok.vocab_size(), 1661u);
  ASSERT_TRUE(tok.token_id("<|im_start|>").has_value());
  EXPECT_EQ(tok.token_text(*tok.token_id("<|im_start|>")), "<|im_start|>");
  EXPECT_TRUE(tok.is_special(*tok.token_id("<|im_start|>")));
  EXPECT_FALSE(tok.is_special(*tok.token_id("<tool_call>")));
  EXPECT_THROW(tok.token_text(5000), keel::Error);
  EXPECT_THROW(tok.decode(std::vector<int32_t>{-1}), keel::Error);
}

std::string load_error(const std::string& text) {
  try {
    Tokenizer::from_json_text(text, "broken.json");
  } catch (const keel::Error& e) {
    return e.what();
  }
  return "(loaded without error)";
}

TEST(TokenizerErrors, MalformedFilesNameTheProblem) {
  EXPECT_THAT(load_error("{\"model\": "), HasSubstr("broken.json"));
  EXPECT_THAT(load_error("[]"), HasSubstr("broken.json"));
  EXPECT_THAT(load_error("{}"), HasSubstr("missing field \"model\""));
  json j = sentencepiece_json();
  j["model"]["type"] = "Unigram";
  EXPECT_THAT(load_error(j.dump()), HasSubstr("unsupported model type \"Unigram\""));
  j = sentencepiece_json();
  j["model"]["merges"].push_back({"x", "y"});
  EXPECT_THAT(load_error(j.dump()), AllOf(HasSubstr("model.merges[10]"), HasSubstr("\"x\" is not in the vocabulary")));
  j = sentencepiece_json();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  EXPECT_THAT(load_error(j.dump()), AllOf(HasSubstr("pre_tokenizer.pattern.Regex"), HasSubstr("invalid regex")));
  j = sentencepiece_json();
  j["model"]["vocab"]["H"] = "seven";
  EXPECT_THAT(load_error(j.dump()), HasSubstr("model.vocab[\"H\"]: expected an integer"));
  j = sentencepiece_json();
  j["added_tokens"][0]["id"] = 1 << 30;
  EXPECT_THAT(load_error(j.dump()), HasSubstr("added_tokens[0].id: id out of range"));
  j = sentencepiece_json();
  j["normalizer"] = {{"type", "Precompiled"}};
  EXPECT_THAT(load_error(j.dump()), HasSubstr("unsupported normalizer type \"Precompiled\""));
}

TEST(TokenizerErrors, MissingFileIsAnError) {
  keel::test::TempDir dir;
  try {
    Tokenizer::from_file(dir.path());
    FAIL() << "expected an error";
  } catch (const keel::Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("tokenizer.json"));
  }
}

TEST(TokenizerCli, PrintsIds) {
  auto model = keel::test::shared_dir() / "models" / "tiny-toolcaller";
  auto tok = Tokenizer::from_file(model);
  std::string expected;
  for (int32_t id : tok.encode("Hello <tool_call> world")) {
    if (!expected.empty()) expected += ' ';
    expected += std::to_string(id);
  }

  auto r = keel::test::run_command(keel::test::keel_binary().string() + " tokenize --model " + model.string() +
                                   " 'Hello <tool_call> world'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, expected + "\n");

  r = keel::test::run_command(keel::test::keel_binary().string() + " tokenize --tokenizer " +
                              (model / "tokenizer.json").string() + " 'Hello <tool_call> world'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, expected + "\n");
}

TEST(TokenizerCli, ReportsBadTokenizer) {
  keel::test::TempDir dir;  // a model folder without tokenizer.json
  std::filesystem::copy_file(keel::test::shared_dir() / "models/tiny-toolcaller/config.json", dir.path() / "config.json");
  auto r = keel::test::run_command(keel::test::keel_binary().string() + " tokenize --model " + dir.path().string() +
                                   " hi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("tokenizer.json"));
}

}  // namespace
