// Tokenizers and chat templates from GGUF metadata (text/gguf_tokenizer.h, chat/gguf_template.h):
// a GGUF's tokenizer encodes and decodes exactly like the tokenizer.json it was converted from,
// the vocab-only GGUFs of llama.cpp's tokenizer tests match their reference vectors id for id,
// unsupported tokenizers are refused by name, and broken metadata is refused naming the key.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <tuple>
#include <memory>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ggml_vocab_support.h"
#include "keel/chat/chat_renderer.h"
#include "keel/chat/gguf_template.h"
#include "keel/chat/template_files.h"
#include "keel/model/gguf_file.h"
#include "keel/model/gguf_writer.h"
#include "keel/text/gguf_tokenizer.h"
#include "keel/text/tokenizer.h"
#include "keel/util/error.h"
#include "test_support.h"

namespace keel {
namespace {

namespace fs = std::filesystem;
using text::Tokenizer;

fs::path vectors_dir() { return test::shared_dir() / "fixtures" / "tokenizer_vectors"; }
fs::path toolcaller_gguf() { return test::shared_dir() / "models" / "gguf" / "tiny-toolcaller-Q8_0.gguf"; }
fs::path toolcaller_dir() { return test::shared_dir() / "models" / "tiny-toolcaller"; }

std::string ids_text(const std::vector<int32_t>& ids) {
  std::ostringstream s;
  for (size_t i = 0; i < ids.size(); ++i) s << (i ? " " : "") << ids[i];
  return s.str();
}

// Texts that exercise every stage: the qwen2 vocab test texts, the golden tokenize texts, chat
// prompts as the template renders them (special tokens, tool calls), code, scripts and emoji, and
// random bytes (invalid UTF-8 included).
std::vector<std::string> comparison_corpus() {
  std::vector<std::string> texts;
  for (const auto& c : test::read_ggml_vectors(vectors_dir() / "ggml-vocab-qwen2.gguf")) texts.push_back(c.text);
  for (const auto& e : fs::directory_iterator(test::shared_dir() / "fixtures" / "golden")) {
    const std::string name = e.path().filename().string();
    if (!name.ends_with(".tokenize.json")) continue;
    const auto golden = nlohmann::json::parse(test::read_text(e.path()));
    for (const auto& c : golden.at("cases")) texts.push_back(c.at("text"));
  }
  const chat::ChatTemplateSource src = chat::load_chat_template_source(toolcaller_dir(), /*want_tools=*/true);
  const chat::ChatTemplate tmpl(src.source, src.bos_token, src.eos_token);
  const auto messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "You answer briefly."},
    {"role": "user", "content": "What's the weather in Paris?  Use   the tool.\n"},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function":
      {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
    {"role": "tool", "content": "{\"temp\": 21.5, \"sky\": \"clear\"}"},
    {"role": "assistant", "content": "It is 21.5 °C and clear.<|im_end|> <tool_call>"},
    {"role": "user", "content": "Merci ! Et à Zürich ? 日本語も。🦙"}])");
  const auto tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "description": "Current weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"},
    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}])");
  texts.push_back(tmpl.render(messages, tools, {{"add_generation_prompt", true}}).text);
  texts.push_back(tmpl.render(messages, nullptr, {{"add_generation_prompt", false}}).text);
  texts.push_back("<|im_start|><|im_end|><|endoftext|><tool_call></tool_call><|im_start|");
  texts.push_back("def f(x):\n\treturn {'a': x ** 2}  # comment\n\n\n    if x != 0x1F: pass\r\n");
  texts.push_back("int main() { std::vector<int> v{1,2,3}; for (auto& x : v) x <<= 2; }");
  texts.push_back("Ünïcödé: e\xCC\x81 (decomposed) é, ﬁ ligature, Ωmega, Русский текст, العربية, हिन्दी, 한국어 👩‍👩‍👧‍👦");
  texts.push_back("   leading and trailing   \n\n\t\t  ");
  std::mt19937 rng(20261201);
  for (int i = 0; i < 200; ++i) {
    std::string s(rng() % 40, '\0');
    for (char& ch : s) ch = static_cast<char>(rng() % 256);
    texts.push_back(std::move(s));
  }
  return texts;
}

TEST(GgufTokenizer, ToolcallerMatchesItsTokenizerJson) {
  const Tokenizer json_tok = Tokenizer::from_file(toolcaller_dir() / "tokenizer.json");
  const gguf::File file(toolcaller_gguf());
  const text::GgufTokenizer g = text::load_gguf_tokenizer(file);
  EXPECT_EQ(g.model, "gpt2");
  EXPECT_EQ(g.pre, "qwen2");
  ASSERT_EQ(g.tokenizer.vocab_size(), json_tok.vocab_size());
  for (int32_t id = 0; id < static_cast<int32_t>(json_tok.vocab_size()); ++id) {
    ASSERT_EQ(g.tokenizer.token_text(id), json_tok.token_text(id)) << id;
    ASSERT_EQ(g.tokenizer.is_special(id), json_tok.is_special(id)) << id;
    const std::vector<int32_t> one{id};
    ASSERT_EQ(g.tokenizer.decode(one), json_tok.decode(one)) << id;
  }
  const auto corpus = comparison_corpus();
  ASSERT_GT(corpus.size(), 300u);
  size_t compared = 0;
  for (const auto& t : corpus) {
    for (bool special : {true, false}) {
      const auto want = json_tok.encode(t, special);
      const auto got = g.tokenizer.encode(t, special);
      ASSERT_EQ(ids_text(got), ids_text(want)) << "text: \"" << t << "\" parse_special " << special;
      ASSERT_EQ(g.tokenizer.decode(got), json_tok.decode(want));
      ASSERT_EQ(g.tokenizer.decode(got, true), json_tok.decode(want, true));
      ++compared;
    }
  }
  std::printf("[ gguf     ] tiny-toolcaller: %zu encodings identical to tokenizer.json\n", compared);
  // The special ids the converter wrote: <|endoftext|> as bos and padding, <|im_end|> as eos.
  EXPECT_EQ(g.special.bos, json_tok.token_id("<|endoftext|>"));
  EXPECT_EQ(g.special.eos, json_tok.token_id("<|im_end|>"));
  EXPECT_EQ(g.special.padding, json_tok.token_id("<|endoftext|>"));
  EXPECT_FALSE(g.special.add_bos);
}

TEST(GgufTokenizer, ToolcallerChatTemplate) {
  const gguf::File file(toolcaller_gguf());
  const chat::ChatTemplateSource folder = chat::load_chat_template_source(toolcaller_dir(), true);
  const chat::ChatTemplateSource src = chat::gguf_chat_template_source(file, true);
  EXPECT_EQ(src.source, folder.source);
  EXPECT_EQ(src.origin, toolcaller_gguf().string() + " (tokenizer.chat_template)");
  EXPECT_EQ(src.eos_token, "<|im_end|>");
  EXPECT_EQ(src.bos_token, "<|endoftext|>");  // the converter's bos id; the folder's config has none
}

// The vocab-only GGUFs of llama.cpp's tokenizer tests against their reference ids: each file keel
// supports must pass every vector, and round-trip each text through decode.
void check_vocab(const std::string& name, const std::string& want_model) {
  const fs::path stem = vectors_dir() / ("ggml-vocab-" + name + ".gguf");
  const gguf::File file(stem);
  const text::GgufTokenizer g = text::load_gguf_tokenizer(file);
  EXPECT_EQ(g.model, want_model);
  const auto cases = test::read_ggml_vectors(stem);
  ASSERT_GT(cases.size(), 40u);
  int mismatches = 0, round_trips = 0;
  for (const auto& c : cases) {
    const auto ids = g.tokenizer.encode(c.text);
    if (ids != c.ids && ++mismatches <= 5)
      ADD_FAILURE() << name << ": \"" << c.text << "\"\n  expected: " << ids_text(c.ids) << "\n  actual:   " << ids_text(ids);
    const std::string back = g.tokenizer.decode(ids);
    if (back != c.text && ++round_trips <= 5) ADD_FAILURE() << name << ": round trip of \"" << c.text << "\" gave \"" << back << "\"";
  }
  std::printf("[ vectors  ] ggml-vocab-%s (GGUF): %zu texts, %zu ids identical\n", name.c_str(), cases.size(),
              cases.size() - static_cast<size_t>(mismatches));
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(round_trips, 0);
}

TEST(GgufTokenizerVectors, LlamaSpm) { check_vocab("llama-spm", "llama"); }
TEST(GgufTokenizerVectors, Phi3) { check_vocab("phi-3", "llama"); }
TEST(GgufTokenizerVectors, Gpt2) { check_vocab("gpt-2", "gpt2"); }
TEST(GgufTokenizerVectors, DeepseekLlm) { check_vocab("deepseek-llm", "gpt2"); }
TEST(GgufTokenizerVectors, DeepseekCoder) { check_vocab("deepseek-coder", "gpt2"); }

TEST(GgufTokenizerVectors, BertWordPieceIsRefusedByName) {
  const gguf::File file(vectors_dir() / "ggml-vocab-bert-bge.gguf");
  try {
    text::load_gguf_tokenizer(file);
    FAIL() << "bert's WordPiece tokenizer loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("key 'tokenizer.ggml.model': 'bert' is not supported"), std::string::npos) << e.what();
  }
}

// Every vocab GGUF in the fixtures folder is one of the above, so a new one cannot be skipped.
TEST(GgufTokenizerVectors, EveryVocabFileIsChecked) {
  const std::vector<std::string> checked = {"llama-spm", "phi-3", "gpt-2", "deepseek-llm", "deepseek-coder", "bert-bge"};
  for (const auto& e : fs::directory_iterator(vectors_dir())) {
    const std::string n = e.path().filename().string();
    if (!n.ends_with(".gguf")) continue;
    const std::string name = n.substr(std::string("ggml-vocab-").size(), n.size() - 5 - std::string("ggml-vocab-").size());
    EXPECT_NE(std::find(checked.begin(), checked.end(), name), checked.end()) << n;
  }
}

// --- Small files written here -------------------------------------------------------------------

gguf::Header parse(const gguf::Writer& w) {
  const std::string bytes = w.bytes();
  return gguf::parse_header({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, "small.gguf");
}

// A byte-level BPE vocabulary: a, b, ab, then a control token and a user-defined one.
gguf::Writer small_bpe() {
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "qwen2");
  w.set_strings("tokenizer.ggml.tokens", {"a", "b", "ab", "Ġ", "Ġab", "<|x|>", "<y>"});
  w.set_int32s("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 3, 4});
  w.set_strings("tokenizer.ggml.merges", {"a b", "Ġ ab"});
  w.set_uint32("tokenizer.ggml.eos_token_id", 5);
  return w;
}

std::string refusal(const gguf::Header& h) {
  try {
    text::load_gguf_tokenizer(h, "small.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "the broken metadata loaded";
  return "";
}

gguf::Value string_value(std::string s) {
  gguf::Value v;
  v.type = gguf::ValueType::STRING;
  v.text = std::move(s);
  return v;
}
gguf::Value int_value(int64_t i, gguf::ValueType t = gguf::ValueType::U32) {
  gguf::Value v;
  v.type = t;
  v.integer = i;
  return v;
}
gguf::Value strings_value(std::vector<std::string> s) {
  gguf::Value v;
  v.type = gguf::ValueType::ARRAY;
  v.element_type = gguf::ValueType::STRING;
  v.texts = std::move(s);
  return v;
}
gguf::Value ints_value(std::vector<int64_t> i) {
  gguf::Value v;
  v.type = gguf::ValueType::ARRAY;
  v.element_type = gguf::ValueType::I32;
  v.integers = std::move(i);
  return v;
}
gguf::Value floats_value(std::vector<double> f) {
  gguf::Value v;
  v.type = gguf::ValueType::ARRAY;
  v.element_type = gguf::ValueType::F32;
  v.numbers = std::move(f);
  return v;
}

TEST(GgufTokenizer, SmallBpeEncodesWithAddedTokens) {
  const auto g = text::load_gguf_tokenizer(parse(small_bpe()), "small.gguf");
  EXPECT_EQ(g.tokenizer.encode("ab ab<|x|>b<y>"), (std::vector<int32_t>{2, 4, 5, 1, 6}));
  EXPECT_TRUE(g.tokenizer.is_special(5));
  EXPECT_FALSE(g.tokenizer.is_special(6));
  EXPECT_EQ(g.tokenizer.encode("<|x|>", false), (std::vector<int32_t>{}));  // '<', '|' are not in this vocabulary
  EXPECT_EQ(g.tokenizer.decode(std::vector<int32_t>{2, 4, 5}), "ab ab<|x|>");
  EXPECT_EQ(g.special.eos, 5);
}

TEST(GgufTokenizer, BrokenMetadataNamesTheKey) {
  using Metadata = std::map<std::string, gguf::Value, std::less<>>;
  using Edit = std::function<void(Metadata&)>;
  auto set = [](std::string key, gguf::Value v) -> Edit { return [=](Metadata& m) { m[key] = v; }; };
  auto erase = [](std::string key) -> Edit { return [=](Metadata& m) { m.erase(key); }; };
  const std::vector<std::tuple<const char*, Edit, const char*>> bpe_cases = {
      {"no tokens", erase("tokenizer.ggml.tokens"), "small.gguf: key 'tokenizer.ggml.tokens': missing"},
      {"no model", erase("tokenizer.ggml.model"), "key 'tokenizer.ggml.model': missing"},
      {"unknown model", set("tokenizer.ggml.model", string_value("bert")), "key 'tokenizer.ggml.model': 'bert' is not supported"},
      {"model not a string", set("tokenizer.ggml.model", int_value(2)), "key 'tokenizer.ggml.model': is a u32, expected a string"},
      {"unknown pre", set("tokenizer.ggml.pre", string_value("xyz")),
       "key 'tokenizer.ggml.pre': 'xyz' is not supported for tokenizer.ggml.model 'gpt2' (supported: qwen2, "},
      {"no pre", erase("tokenizer.ggml.pre"), "key 'tokenizer.ggml.pre': missing"},
      {"merge not a pair", set("tokenizer.ggml.merges", strings_value({"a b", "ab"})),
       "key 'tokenizer.ggml.merges': entry 1 ('ab'): not two tokens separated by a space"},
      {"merge of a non-token", set("tokenizer.ggml.merges", strings_value({"a c"})),
       "key 'tokenizer.ggml.merges': entry 0 ('a c'): 'c' is not a token"},
      {"merge result not a token", set("tokenizer.ggml.merges", strings_value({"b a"})),
       "key 'tokenizer.ggml.merges': entry 0 ('b a'): 'ba' (the merged pair) is not a token"},
      {"no merges", erase("tokenizer.ggml.merges"), "key 'tokenizer.ggml.merges': missing"},
      {"merges not strings", set("tokenizer.ggml.merges", ints_value({1})), "key 'tokenizer.ggml.merges': is not an array of strings"},
      {"eos out of range", set("tokenizer.ggml.eos_token_id", int_value(7)),
       "key 'tokenizer.ggml.eos_token_id': 7 is outside the vocabulary (7 tokens)"},
      {"bos negative", set("tokenizer.ggml.bos_token_id", int_value(-1, gguf::ValueType::I32)),
       "key 'tokenizer.ggml.bos_token_id': -1 is outside the vocabulary"},
      {"padding not an integer", set("tokenizer.ggml.padding_token_id", string_value("0")),
       "key 'tokenizer.ggml.padding_token_id': is a string, expected an integer"},
      {"types too short", set("tokenizer.ggml.token_type", ints_value({1, 1})),
       "key 'tokenizer.ggml.token_type': has 2 entries but tokenizer.ggml.tokens has 7"},
      {"type out of range", set("tokenizer.ggml.token_type", ints_value({1, 1, 1, 1, 1, 9, 4})),
       "key 'tokenizer.ggml.token_type': entry 5 is 9"},
      {"duplicate token", set("tokenizer.ggml.tokens", strings_value({"a", "b", "ab", "Ġ", "Ġab", "a", "<y>"})),
       "key 'tokenizer.ggml.tokens': entries 0 and 5 are both 'a'"},
      {"tokens not strings", set("tokenizer.ggml.tokens", ints_value({1, 2})), "key 'tokenizer.ggml.tokens': is not an array of strings"},
      {"add_bos without bos", set("tokenizer.ggml.add_bos_token", int_value(1, gguf::ValueType::BOOL)),
       "key 'tokenizer.ggml.bos_token_id': missing, but tokenizer.ggml.add_bos_token is true"},
  };
  for (const auto& [what, edit, expected] : bpe_cases) {
    gguf::Header h = parse(small_bpe());
    edit(h.metadata);
    const std::string message = refusal(h);
    EXPECT_NE(message.find(expected), std::string::npos) << what << ": " << message;
  }
  gguf::Header spm;
  spm.metadata["tokenizer.ggml.model"] = string_value("llama");
  spm.metadata["tokenizer.ggml.tokens"] = strings_value({"<unk>", "a"});
  EXPECT_NE(refusal(spm).find("key 'tokenizer.ggml.scores': missing"), std::string::npos) << refusal(spm);
  spm.metadata["tokenizer.ggml.scores"] = floats_value({0.0});
  EXPECT_NE(refusal(spm).find("key 'tokenizer.ggml.scores': has 1 entries but tokenizer.ggml.tokens has 2"), std::string::npos)
      << refusal(spm);
  spm.metadata["tokenizer.ggml.scores"] = floats_value({0.0, -1.0});
  spm.metadata["tokenizer.ggml.pre"] = string_value("qwen2");
  EXPECT_NE(refusal(spm).find("key 'tokenizer.ggml.pre': 'qwen2' is not supported for tokenizer.ggml.model 'llama'"),
            std::string::npos)
      << refusal(spm);
  spm.metadata.erase("tokenizer.ggml.pre");
  spm.metadata["tokenizer.ggml.merges"] = strings_value({"a a"});
  EXPECT_NE(refusal(spm).find("key 'tokenizer.ggml.merges': present, but a \"llama\""), std::string::npos) << refusal(spm);
  spm.metadata.erase("tokenizer.ggml.merges");
  EXPECT_EQ(text::load_gguf_tokenizer(spm, "spm.gguf").tokenizer.vocab_size(), 2u);  // the repaired metadata loads
}

// SentencePiece BPE: the merges come from the scores. With "bc" scoring above "ab", "abc" is
// a + bc; the other way round ab + c. Text gets "▁" in front and spaces become "▁"; a character
// missing from the vocabulary falls back to its <0xNN> byte tokens.
gguf::Writer small_spm(float ab, float bc) {
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string("tokenizer.ggml.pre", "default");
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "c", "ab", "bc", "\xE2\x96\x81" "a"};
  std::vector<float> scores = {0, 0, 0, -1, -2, -3, -4, ab, bc, -50};
  std::vector<int32_t> types = {2, 3, 3, 1, 1, 1, 1, 1, 1, 1};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    tokens.push_back(name);
    scores.push_back(0);
    types.push_back(6);
  }
  w.set_strings("tokenizer.ggml.tokens", tokens);
  w.set_float32s("tokenizer.ggml.scores", scores);
  w.set_int32s("tokenizer.ggml.token_type", types);
  w.set_uint32("tokenizer.ggml.bos_token_id", 1);
  w.set_uint32("tokenizer.ggml.eos_token_id", 2);
  w.set_uint32("tokenizer.ggml.unknown_token_id", 0);
  return w;
}

TEST(GgufTokenizer, SentencePieceMergesFollowScores) {
  const auto ab_first = text::load_gguf_tokenizer(parse(small_spm(-5, -6)), "spm.gguf");
  const auto bc_first = text::load_gguf_tokenizer(parse(small_spm(-6, -5)), "spm.gguf");
  // "▁abc": ▁a (score -50) loses to ab / bc either way.
  EXPECT_EQ(ab_first.tokenizer.encode("abc"), (std::vector<int32_t>{3, 7, 6}));
  EXPECT_EQ(bc_first.tokenizer.encode("abc"), (std::vector<int32_t>{9, 8}));
  // "x" is not a piece: its byte 0x78 is token 10 + 0x78. After a control token "▁" is prepended again.
  EXPECT_EQ(ab_first.tokenizer.encode("x<s>a"), (std::vector<int32_t>{3, 10 + 0x78, 1, 9}));
  EXPECT_EQ(ab_first.tokenizer.decode(ab_first.tokenizer.encode("ab c")), "ab c");
  EXPECT_TRUE(ab_first.special.add_bos);  // SentencePiece's default when the file does not say
  EXPECT_EQ(ab_first.pre, "default");
}

TEST(GgufChatTemplate, NamedVariantsAndTokenTexts) {
  gguf::Writer w = small_bpe();
  w.set_string("tokenizer.chat_template", "plain {{ bos_token }}");
  w.set_string("tokenizer.chat_template.tool_use", "tools {{ eos_token }}");
  w.set_uint32("tokenizer.ggml.bos_token_id", 2);
  const gguf::Header h = parse(w);
  const auto plain = chat::gguf_chat_template_source(h, "t.gguf", false);
  EXPECT_EQ(plain.source, "plain {{ bos_token }}");
  EXPECT_EQ(plain.origin, "t.gguf (tokenizer.chat_template)");
  EXPECT_EQ(plain.bos_token, "ab");
  EXPECT_EQ(plain.eos_token, "<|x|>");
  const auto tools = chat::gguf_chat_template_source(h, "t.gguf", true);
  EXPECT_EQ(tools.source, "tools {{ eos_token }}");
  EXPECT_EQ(tools.origin, "t.gguf (tokenizer.chat_template.tool_use)");

  gguf::Writer only_named = small_bpe();
  only_named.set_string("tokenizer.chat_template.rag", "rag");
  EXPECT_EQ(chat::gguf_chat_template_source(parse(only_named), "t.gguf").source, "rag");

  EXPECT_FALSE(chat::find_gguf_chat_template(parse(small_bpe()), "t.gguf").has_value());
  try {
    chat::gguf_chat_template_source(parse(small_bpe()), "t.gguf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("t.gguf: no chat template"), std::string::npos) << e.what();
  }
  gguf::Writer bad = small_bpe();
  bad.set_string("tokenizer.chat_template", "x");
  bad.set_uint32("tokenizer.ggml.bos_token_id", 70);
  try {
    chat::gguf_chat_template_source(parse(bad), "t.gguf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("key 'tokenizer.ggml.bos_token_id': 70 is outside the vocabulary"), std::string::npos)
        << e.what();
  }
  gguf::Header not_text = parse(small_bpe());
  not_text.metadata["tokenizer.chat_template"] = int_value(3);
  try {
    chat::gguf_chat_template_source(not_text, "t.gguf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("key 'tokenizer.chat_template': is a u32, expected a string"), std::string::npos)
        << e.what();
  }
}

// The reverse: a tokenizer.json's tokenizer.ggml.* values, written and read back, tokenize the same.
TEST(GgufTokenizer, MetadataFromTokenizerJsonRoundTrips) {
  const auto tj = nlohmann::json::parse(test::read_text(toolcaller_dir() / "tokenizer.json"));
  const text::GgufTokenizerMetadata md = text::gguf_tokenizer_metadata(tj, "tokenizer.json");
  EXPECT_EQ(md.model, "gpt2");
  EXPECT_EQ(md.pre, "qwen2");
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", md.model);
  w.set_string("tokenizer.ggml.pre", md.pre);
  w.set_strings("tokenizer.ggml.tokens", md.tokens);
  w.set_int32s("tokenizer.ggml.token_type", md.token_types);
  w.set_strings("tokenizer.ggml.merges", md.merges);
  const auto g = text::load_gguf_tokenizer(parse(w), "written.gguf");
  const Tokenizer json_tok = Tokenizer::from_json(tj, "tokenizer.json");
  for (const auto& t : test::read_ggml_vectors(vectors_dir() / "ggml-vocab-qwen2.gguf"))
    EXPECT_EQ(g.tokenizer.encode(t.text), json_tok.encode(t.text)) << t.text;
  EXPECT_EQ(g.tokenizer.encode("<|im_start|>user<tool_call>"), json_tok.encode("<|im_start|>user<tool_call>"));

  // Llama 3.1's tokenizer.json is the "llama-bpe" recipe (its regex, no normalizer, ignore_merges).
  const auto llama3 = nlohmann::json::parse(
      test::read_text(test::shared_dir() / "fixtures" / "tokenizers" / "llama3.1" / "tokenizer.json"));
  EXPECT_EQ(text::gguf_tokenizer_metadata(llama3, "llama3.1").pre, "llama-bpe");

  auto llama2_like = tj;
  llama2_like["model"]["byte_fallback"] = true;
  EXPECT_THROW(text::gguf_tokenizer_metadata(llama2_like, "t.json"), Error);
  auto other_regex = tj;
  other_regex["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\s+";
  try {
    text::gguf_tokenizer_metadata(other_regex, "t.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("t.json: pre_tokenizer: matches no tokenizer.ggml.pre"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace keel

namespace keel {
namespace {

// The fuzz target's seeds are valid files, so its mutations start from tokenizers that load.
TEST(GgufTokenizer, FuzzSeedsLoad) {
  int seeds = 0;
  for (const auto& e : fs::directory_iterator(test::source_dir() / "fuzz" / "corpus" / "gguf_tokenizer_fuzz")) {
    const gguf::File file(e.path());
    const auto g = text::load_gguf_tokenizer(file);
    EXPECT_FALSE(g.tokenizer.encode("ab abc").empty()) << e.path();
    ++seeds;
  }
  EXPECT_GE(seeds, 3);
}

}  // namespace
}  // namespace keel
