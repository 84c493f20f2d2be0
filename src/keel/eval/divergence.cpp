#include "keel/eval/divergence.h"

#include <algorithm>
#include <cmath>

#include "keel/util/error.h"

namespace keel::eval {
namespace {

double log_sum_exp(std::span<const float> x) {
  double m = -INFINITY;
  for (float v : x) m = std::max(m, static_cast<double>(v));
  double s = 0;
  for (float v : x) s += std::exp(static_cast<double>(v) - m);
  return m + std::log(s);
}

size_t first_argmax(std::span<const float> x) {
  return static_cast<size_t>(std::max_element(x.begin(), x.end()) - x.begin());
}

}  // namespace

PositionDivergence compare_logits(std::span<const float> reference, std::span<const float> arm) {
  if (reference.size() != arm.size() || reference.empty()) throw Error("compare_logits: rows differ in length");
  const double lse_r = log_sum_exp(reference), lse_a = log_sum_exp(arm);
  double kl = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    const double lr = static_cast<double>(reference[i]) - lse_r;
    const double la = static_cast<double>(arm[i]) - lse_a;
    kl += std::exp(lr) * (lr - la);
  }
  // KL is non-negative; rounding of nearly equal rows can leave a tiny negative sum.
  return {std::max(kl, 0.0), first_argmax(reference) == first_argmax(arm)};
}

void DivergenceStats::add(const PositionDivergence& d) {
  kls_.push_back(d.kl);
  sum_ += d.kl;
  max_ = std::max(max_, d.kl);
  if (!d.same_top1) ++flips_;
}

double DivergenceStats::mean_kl() const { return kls_.empty() ? 0 : sum_ / static_cast<double>(kls_.size()); }

double DivergenceStats::p99_kl() const {
  if (kls_.empty()) return 0;
  std::vector<double> v = kls_;
  const size_t rank = static_cast<size_t>(std::ceil(0.99 * static_cast<double>(v.size())));
  const size_t k = std::min(v.size() - 1, rank == 0 ? 0 : rank - 1);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

double DivergenceStats::max_kl() const { return max_; }

double DivergenceStats::top1_agreement() const {
  return kls_.empty() ? 1.0 : 1.0 - static_cast<double>(flips_) / static_cast<double>(kls_.size());
}

double DivergenceStats::flips_per_10k() const {
  return kls_.empty() ? 0.0 : 1e4 * static_cast<double>(flips_) / static_cast<double>(kls_.size());
}

nlohmann::ordered_json DivergenceStats::to_json() const {
  return {{"positions", positions()},   {"mean_kl", mean_kl()},
          {"p99_kl", p99_kl()},         {"max_kl", max_kl()},
          {"top1_agreement", top1_agreement()}, {"flips", flips()},
          {"flips_per_10k", flips_per_10k()}};
}

}  // namespace keel::eval
