#include "keel/eval/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace keel::eval {

Progress::Progress(int64_t total, bool enabled)
    : total_(std::max<int64_t>(total, 1)), enabled_(enabled), start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() { finish(); }

bool Progress::stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

void Progress::step(const std::string& label) {
  ++done_;
  draw(label);
}

void Progress::draw(const std::string& label) {
  if (!enabled_ || finished_) return;
  constexpr int kWidth = 30;
  const int64_t shown = std::min(done_, total_);
  const int filled = static_cast<int>(kWidth * shown / total_);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double eta = shown > 0 ? elapsed * static_cast<double>(total_ - shown) / static_cast<double>(shown) : 0;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  // \033[K clears what a longer previous label left behind.
  std::fprintf(stderr, "\r[%s] %lld/%lld %3.0f%% eta %.0fs  %s\033[K", bar.c_str(), static_cast<long long>(shown),
               static_cast<long long>(total_), 100.0 * static_cast<double>(shown) / static_cast<double>(total_), eta,
               label.substr(0, 60).c_str());
  std::fflush(stderr);
}

void Progress::finish() {
  if (!enabled_ || finished_) return;
  finished_ = true;
  std::fprintf(stderr, "\n");
}

}  // namespace keel::eval
