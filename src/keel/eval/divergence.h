#pragma once
// Comparing two next-token distributions given as logits, and summarising many such comparisons.
//
// Threads: compare_logits is a pure function: any thread. A DivergenceStats is a plain value that
// add() changes: one thread at a time; its const members only read.
#include <cstdint>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

namespace keel::eval {

struct PositionDivergence {
  double kl = 0;             // KL(reference || arm) in nats
  bool same_top1 = true;     // both argmaxes equal (ties go to the lowest id, as the sampler's)
};

// Softmax of both rows and KL(reference || arm), all in double so that a divergence of 1e-9 is
// not lost in float rounding. Identical rows give exactly 0. Rows must have the same length.
PositionDivergence compare_logits(std::span<const float> reference, std::span<const float> arm);

// Mean, p99 and max KL, top-1 agreement and flips over a set of positions.
class DivergenceStats {
 public:
  void add(const PositionDivergence& d);

  int64_t positions() const { return static_cast<int64_t>(kls_.size()); }
  int64_t flips() const { return flips_; }  // positions whose top-1 token differs
  double mean_kl() const;
  double p99_kl() const;  // nearest-rank 99th percentile
  double max_kl() const;
  double top1_agreement() const;  // 1 when there are no positions
  double flips_per_10k() const;

  nlohmann::ordered_json to_json() const;

 private:
  std::vector<double> kls_;
  double sum_ = 0;
  double max_ = 0;
  int64_t flips_ = 0;
};

}  // namespace keel::eval
