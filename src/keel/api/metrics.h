#pragma once
// Counters for /metrics, in the Prometheus text exposition format. Everything is cumulative since
// start; gauges (queue depth, memory) are sampled by the caller when the page is rendered.
// Thread-safe: the engine thread counts turns, HTTP threads count responses and read everything.
// The prefix-cache numbers of /health come from here too (prefix()), so both pages agree.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace keel::api {

struct TurnCounts {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens served from the prefix cache
  int64_t output_tokens = 0;
  int64_t valid_calls = 0;
  int64_t invalid_calls = 0;
  int64_t retried_calls = 0;
  double first_token_seconds = 0;
  double total_seconds = 0;
};

// Turns that reused a cached prefix (the live sequence or the pool's prefix cache: whatever the
// turn's usage reports as cached) and turns that prefilled their whole prompt.
struct PrefixCounts {
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t reused_tokens = 0;  // prompt tokens served from the cache, summed
  double hit_rate() const { return hits + misses == 0 ? 0.0 : static_cast<double>(hits) / static_cast<double>(hits + misses); }
};

class Metrics {
 public:
  // `route` is a label from a fixed set (the caller buckets unknown paths), never a raw path; it is
  // escaped as a label value all the same, so no string can add a line to the page.
  void count_response(const std::string& route, int status);
  // A turn with no prompt tokens (cancelled before it started, failed) is neither hit nor miss.
  void count_turn(const TurnCounts& turn);
  PrefixCounts prefix() const;

  // gauges: name -> (help, value)
  std::string prometheus(const std::vector<std::pair<std::string, std::pair<std::string, double>>>& gauges) const;

 private:
  struct Summary {
    double sum = 0;
    int64_t count = 0;
  };
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, int64_t> responses_;
  TurnCounts totals_;
  int64_t turns_ = 0;
  int64_t prefix_hits_ = 0, prefix_misses_ = 0;
  Summary first_token_, duration_;
};

}  // namespace keel::api
