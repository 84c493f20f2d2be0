#pragma once
// A one-line progress bar on stderr, redrawn in place. Disabled (silent) unless stderr is a
// terminal or the caller forces it (--progress), so logs and CI output stay clean.
//
// Threads: a Progress holds its count and draws the line itself: one thread (the one running the
// eval) calls step() and finish(). stderr_is_terminal() from any thread.
#include <chrono>
#include <cstdint>
#include <string>

namespace keel::eval {

class Progress {
 public:
  // enabled: draw at all. total: the number of steps the whole run will take.
  Progress(int64_t total, bool enabled);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void step(const std::string& label);  // one step done; `label` says what is running now
  void finish();                        // ends the line (also done by the destructor)
  int64_t done() const { return done_; }

  static bool stderr_is_terminal();

 private:
  void draw(const std::string& label);

  int64_t total_;
  int64_t done_ = 0;
  bool enabled_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace keel::eval
