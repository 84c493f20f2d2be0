#pragma once
// Client stop sequences over streamed text. Text is released as soon as it can no longer be the
// start of a stop sequence, so a client never sees part of one; when one completes, everything
// before it is released and generation ends.
//
// Threads: one StopMatcher per turn, used by the thread that runs that turn.
#include <string>
#include <string_view>
#include <vector>

namespace keel {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  // Appends `text`; returns what may be sent now. After a match, matched() is set and later
  // input is ignored.
  std::string feed(std::string_view text);
  // End of output: whatever was held back.
  std::string flush();

  bool matched() const { return !matched_.empty(); }
  const std::string& matched_sequence() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  std::string matched_;
};

}  // namespace keel
