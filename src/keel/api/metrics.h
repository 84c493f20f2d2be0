#pragma once
// Counters for /metrics, in the Prometheus text exposition format. Everything is cumulative since
// start; gauges (queue depth, memory) are sampled by the caller when the page is rendered.
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

class Metrics {
 public:
  void count_response(const std::string& route, int status);
  void count_turn(const TurnCounts& turn);

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
  int64_t prefix_hits_ = 0;
  Summary first_token_, duration_;
};

}  // namespace keel::api
