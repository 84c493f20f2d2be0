// Output rows no token has are never sampled: a model whose embedding has more rows than its
// tokenizer has tokens (Qwen2.5: 151,936 rows, 151,665 tokens) used to draw one now and then,
// which ended the stream in an error and lost the text. Here a random-weight copy of
// tiny-toolcaller padded to 4,096 rows (the tokenizer has 1,661), so most of the probability mass
// sits on rows without a token, answers long sampled requests on every route with text.
#include <gtest/gtest.h>

#include <fstream>

#include "keel/engine/model_text.h"
#include "keel/engine/sampler.h"
#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;

constexpr int64_t kPaddedRows = 4096;

std::filesystem::path padded_talker(const TempDir& dir) {
  const auto src = tiny_toolcaller_dir();
  json config = json::parse(read_text(src / "config.json"));
  config["vocab_size"] = kPaddedRows;
  const auto config_path = dir.path() / "config.json";
  std::ofstream(config_path) << config.dump(2);
  const auto out = dir.path() / "padded-talker";
  const CommandResult r =
      run_command(keel_binary().string() + " synth --config " + config_path.string() + " --dtype bf16 --out " + out.string());
  if (r.exit_code != 0) throw std::runtime_error(r.output);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) std::filesystem::copy_file(src / f, out / f);
  return out;
}

TEST(ServePaddedVocab, RowsWithoutATokenAreNeverSampled) {
  TempDir tmp;
  ServerProcess server({"--model", padded_talker(tmp).string(), "--alias", "*"});
  auto client = server.client();
  int64_t sampled = 0;
  for (int seed = 1; seed <= 3; ++seed) {
    const json chat = {{"model", "m"}, {"max_tokens", 64}, {"temperature", 1.5}, {"seed", seed},
                       {"messages", json::array({{{"role", "user"}, {"content", "Tell me a story."}}})}};
    const JsonResponse r = post_json(client, "/v1/chat/completions", chat);
    ASSERT_EQ(r.status, 200) << r.text;
    // Random weights end early only by drawing one of the tokens that end a turn.
    sampled += r.body["usage"]["completion_tokens"].get<int64_t>();
    EXPECT_EQ(r.body["choices"][0]["message"]["content"].get<std::string>().empty(), false) << r.text;
    json streamed = chat;
    streamed["stream"] = true;
    const JsonResponse s = post_json(client, "/v1/chat/completions", streamed);
    ASSERT_EQ(s.status, 200);
    EXPECT_EQ(s.text.find("\"error\""), std::string::npos) << s.text;
  }
  EXPECT_GE(sampled, 96);  // of 192: most of them drawn where most of the mass is padding
  EXPECT_EQ(server.log().find(", error: "), std::string::npos) << server.log();
}

TEST(ServePaddedVocab, QwenTokenizerLeavesItsPaddingRowsUnsampled) {
  const auto tok = text::Tokenizer::from_file(shared_dir() / "fixtures/tokenizers/qwen2.5");
  const std::vector<int32_t> ids = ids_without_token(tok, 151936);
  ASSERT_EQ(ids.size(), 151936u - tok.vocab_size());
  EXPECT_EQ(ids.front(), static_cast<int32_t>(tok.vocab_size()));
  EXPECT_EQ(ids.back(), 151935);
  // Masked ids are drawn by no sampler, however flat the distribution.
  std::vector<float> logits(8, 0.0f);
  const std::vector<int32_t> masked = {0, 2, 3, 5, 6, 7};
  mask_logits(logits, masked);
  for (const SamplingParams& p : {SamplingParams{2.0, 0, 1.0, 0.0, 7}, SamplingParams{1.0, 5, 0.99, 0.0, 9},
                                  SamplingParams{0.0, 0, 1.0, 0.0, 0}}) {
    Sampler sampler(p);
    for (int i = 0; i < 2000; ++i) {
      const int32_t id = sampler.sample(logits);
      EXPECT_TRUE(id == 1 || id == 4) << id;
    }
  }
}

}  // namespace
}  // namespace keel::test
