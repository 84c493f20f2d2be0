#include <gtest/gtest.h>

#include "keel/engine/stop_matcher.h"

namespace keel {
namespace {

// Feeds `text` in pieces of `step` bytes; returns what was released and whether a stop matched.
std::pair<std::string, std::string> run(const std::vector<std::string>& stops, const std::string& text, size_t step) {
  StopMatcher m(stops);
  std::string out;
  for (size_t i = 0; i < text.size() && !m.matched(); i += step) out += m.feed(text.substr(i, step));
  if (!m.matched()) out += m.flush();
  return {out, m.matched_sequence()};
}

TEST(StopMatcher, CutsBeforeTheEarliestStopWhateverTheSplit) {
  for (size_t step = 1; step <= 12; ++step) {
    EXPECT_EQ(run({"END", "STOP"}, "hello wSTOPorld END", step), std::make_pair(std::string("hello w"), std::string("STOP")));
    EXPECT_EQ(run({"\n\n"}, "line one\nline two\n\nrest", step),
              std::make_pair(std::string("line one\nline two"), std::string("\n\n")));
    EXPECT_EQ(run({"abc"}, "ababab", step), std::make_pair(std::string("ababab"), std::string()));
  }
}

TEST(StopMatcher, HoldsBackOnlyWhatCouldStartAStop) {
  StopMatcher m({"</answer>"});
  EXPECT_EQ(m.feed("partial </ans"), "partial ");
  EXPECT_EQ(m.feed("wer-not"), "</answer-not");
  EXPECT_FALSE(m.matched());
  StopMatcher none({});
  EXPECT_EQ(none.feed("anything"), "anything");
}

}  // namespace
}  // namespace keel
