// `keel run` end to end through the real binary on the bundled model.
#include <gtest/gtest.h>

#include "test_support.h"

namespace keel {
namespace {

std::string keel(const std::string& args) { return test::keel_binary().string() + " " + args; }
std::string bundled() { return (test::source_dir() / "models/tiny-toolcaller").string(); }

TEST(CliRun, PromptThroughTokenizerPrintsTextAndTimings) {
  auto r = test::run_command(keel("run --model " + bundled() +
                                  " --prompt '<|im_start|>user\nList the files<|im_end|>\n<|im_start|>assistant\n' --max-tokens 8"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("keel: prompt "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tok/s"), std::string::npos) << r.output;
}

TEST(CliRun, TokensAndIdsAreReproducibleWithSeed) {
  const std::string cmd = keel("run --model " + bundled() + " --tokens 1657,882,198 --ids --max-tokens 12 --temperature 0.9 --top-k 50 --top-p 0.95 --min-p 0.01 --seed 42");
  auto a = test::run_command(cmd, false), b = test::run_command(cmd, false);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(a.output, b.output);
  EXPECT_FALSE(a.output.empty());
}

TEST(CliRun, GreedyMatchesGoldenContinuation) {
  // stories260K from BOS: "Once upon a time, ..." as llama2.c prints it (ids from the golden file).
  auto r = test::run_command(keel("run --model " + (test::shared_dir() / "models/stories260K-hf").string() +
                                  " --tokens 1 --ids --max-tokens 5"), false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "403 407 261 378 432\n");
}

TEST(CliRun, BadFlagsAreClearErrors) {
  auto r = test::run_command(keel("run --model " + bundled() + " --tokens 1 --max-tokenz 3"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("unknown flag --max-tokenz"), std::string::npos) << r.output;
  r = test::run_command(keel("run --model " + bundled() + " --tokens 1,x"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("'x' is not a token id"), std::string::npos) << r.output;
  r = test::run_command(keel("run --model " + bundled() + " --tokens 99999"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("outside the vocabulary"), std::string::npos) << r.output;
  r = test::run_command(keel("frobnicate"));
  EXPECT_EQ(r.exit_code, 2);
}

TEST(CliSynth, WritesLoadableModelOfRealShape) {
  test::TempDir tmp;
  auto cfg = test::shared_dir() / "fixtures/configs/Qwen2.5-0.5B-Instruct/config.json";
  // mlx4 keeps the file small (~280 MB) while every tensor has its real shape.
  auto r = test::run_command(keel("synth --config " + cfg.string() + " --dtype mlx4 --out " + (tmp.path() / "m").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = test::run_command(keel("run --model " + (tmp.path() / "m").string() + " --tokens 1,2,3 --ids --max-tokens 2"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("mlx4 weights"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace keel
