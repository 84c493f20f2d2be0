// `keel bench --parallel` end to end through the real binary on the bundled model: both phases run
// through the step scheduler and print their rows. Only the rows are checked, never their numbers.
#include <gtest/gtest.h>

#include "test_support.h"

namespace keel {
namespace {

std::string bundled() { return (test::source_dir() / "models/tiny-toolcaller").string(); }

TEST(CliBenchParallel, PrintsDecodeAndTimeToFirstTokenRows) {
  const auto r = test::run_command(test::keel_binary().string() + " bench --model " + bundled() +
                                   " --parallel 2 --prompt-tokens 16 --gen-tokens 4 --threads 1"
                                   " --long-prompt-tokens 64 --short-requests 3 --short-interval-ms 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* row : {"parallel         2 turns at once", "wall ", "aggregate decode ", "per-sequence ", "steps ", "ttft steps ",
                          "ttft setup       a 64-token prompt", "3 requests of 32 + 1 tokens", "ttft p50 ", "ttft p99 "})
    EXPECT_NE(r.output.find(row), std::string::npos) << "no '" << row << "' in\n" << r.output;
  EXPECT_NE(r.output.find("tok/s"), std::string::npos) << r.output;
}

TEST(CliBenchParallel, NoShortRequestsSkipsTheTimeToFirstTokenPhase) {
  const auto r = test::run_command(test::keel_binary().string() + " bench --model " + bundled() +
                                   " --parallel 1 --prompt-tokens 8 --gen-tokens 2 --threads 1 --short-requests 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("aggregate decode "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("ttft"), std::string::npos) << r.output;
}

TEST(CliBenchParallel, ModelWithoutTokenizerIsAClearError) {
  // stories260K-hf has no tokenizer.json, which the serving path needs.
  const auto r = test::run_command(test::keel_binary().string() + " bench --model " +
                                   (test::shared_dir() / "models/stories260K-hf").string() + " --parallel 2");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("tokenizer.json"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace keel
