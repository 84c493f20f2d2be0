// Invariant 3: encoding matches the reference vectors id for id, and decode(encode(x)) == x.
// The vectors are llama.cpp's ggml-vocab test texts (qwen2, llama-bpe) and the golden
// *.tokenize.json files (tiny-toolcaller, Qwen2.5, Qwen3, Llama 3.1, Gemma 3).
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ggml_vocab_support.h"
#include "keel/text/tokenizer.h"
#include "test_support.h"

namespace {

using keel::text::Tokenizer;
namespace fs = std::filesystem;

// Loading the large vocabularies takes a moment, so each tokenizer is loaded once per test run.
const Tokenizer& load(const fs::path& path) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[path.string()];
  if (!slot) slot = std::make_unique<Tokenizer>(Tokenizer::from_file(path));
  return *slot;
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::ostringstream s;
  for (size_t i = 0; i < ids.size(); ++i) s << (i ? " " : "") << ids[i];
  return s.str();
}

struct VectorCase {
  std::string text;
  std::vector<int32_t> ids;
};

// Counts texts whose ids differ and texts that do not survive a round trip; reports the first few.
void check_cases(const Tokenizer& tok, const std::vector<VectorCase>& cases, const std::string& name) {
  int id_mismatches = 0, round_trip_failures = 0;
  for (const auto& c : cases) {
    auto ids = tok.encode(c.text);
    if (ids != c.ids) {
      if (++id_mismatches <= 5)
        ADD_FAILURE() << name << ": ids differ for text \"" << c.text << "\"\n  expected: " << ids_text(c.ids)
                      << "\n  actual:   " << ids_text(ids);
    }
    std::string back = tok.decode(ids);
    if (back != c.text) {
      if (++round_trip_failures <= 5)
        ADD_FAILURE() << name << ": round trip of \"" << c.text << "\" gave \"" << back << "\"";
    }
  }
  size_t total = cases.size();
  std::printf("[ vectors  ] %s: %zu texts, %zu ids identical, %zu round trips exact\n", name.c_str(), total,
              total - static_cast<size_t>(id_mismatches), total - static_cast<size_t>(round_trip_failures));
  EXPECT_EQ(id_mismatches, 0) << name;
  EXPECT_EQ(round_trip_failures, 0) << name;
}

std::vector<VectorCase> read_ggml_vectors(const fs::path& stem) {
  std::vector<VectorCase> cases;
  for (auto& v : keel::test::read_ggml_vectors(stem)) cases.push_back({std::move(v.text), std::move(v.ids)});
  return cases;
}

TEST(TokenizerVectors, Qwen2GgmlVocab) {
  auto shared = keel::test::shared_dir() / "fixtures";
  auto cases = read_ggml_vectors(shared / "tokenizer_vectors" / "ggml-vocab-qwen2.gguf");
  ASSERT_EQ(cases.size(), 46u);
  check_cases(load(shared / "tokenizers" / "qwen2.5" / "tokenizer.json"), cases, "ggml-vocab-qwen2");
}

TEST(TokenizerVectors, LlamaBpeGgmlVocab) {
  auto shared = keel::test::shared_dir() / "fixtures";
  auto cases = read_ggml_vectors(shared / "tokenizer_vectors" / "ggml-vocab-llama-bpe.gguf");
  ASSERT_EQ(cases.size(), 46u);
  check_cases(load(shared / "tokenizers" / "llama3.1" / "tokenizer.json"), cases, "ggml-vocab-llama-bpe");
}

// Golden files name their tokenizer relative to the shared folder (or its fixtures folder).
fs::path resolve_tokenizer(const std::string& relative) {
  for (const auto& base : {keel::test::shared_dir(), keel::test::shared_dir() / "fixtures"}) {
    if (fs::exists(base / relative / "tokenizer.json")) return base / relative / "tokenizer.json";
  }
  ADD_FAILURE() << "no tokenizer.json for " << relative;
  return {};
}

class TokenizerGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerGolden, IdsMatchAndRoundTrip) {
  auto file = keel::test::shared_dir() / "fixtures" / "golden" / (GetParam() + ".tokenize.json");
  auto golden = nlohmann::json::parse(keel::test::read_text(file));
  std::vector<VectorCase> cases;
  for (const auto& c : golden.at("cases")) cases.push_back({c.at("text"), c.at("ids").get<std::vector<int32_t>>()});
  ASSERT_FALSE(cases.empty());
  auto path = resolve_tokenizer(golden.at("tokenizer"));
  ASSERT_FALSE(path.empty());
  check_cases(load(path), cases, GetParam());
}

// Every golden file present must be listed here, so a new one cannot be skipped silently.
const std::vector<std::string> kGoldenNames = {"tiny-toolcaller", "qwen2.5", "qwen3", "llama3.1", "gemma3"};

INSTANTIATE_TEST_SUITE_P(TokenizerFiles, TokenizerGolden, ::testing::ValuesIn(kGoldenNames),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

TEST(TokenizerGoldenFiles, AllListed) {
  for (const auto& e : fs::directory_iterator(keel::test::shared_dir() / "fixtures" / "golden")) {
    std::string name = e.path().filename().string();
    const std::string suffix = ".tokenize.json";
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    std::string stem = name.substr(0, name.size() - suffix.size());
    EXPECT_NE(std::find(kGoldenNames.begin(), kGoldenNames.end(), stem), kGoldenNames.end()) << name;
  }
}

}  // namespace
