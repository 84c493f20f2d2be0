#include "keel/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "keel/util/error.h"

namespace keel {

int32_t argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

Sampler::Sampler(const SamplingParams& p) : params_(p), rng_(p.seed) {
  if (!(p.temperature >= 0) || !std::isfinite(p.temperature)) throw Error("temperature must be >= 0");
  if (p.top_k < 0) throw Error("top_k must be >= 0");
  if (!(p.top_p >= 0 && p.top_p <= 1)) throw Error("top_p must be in [0, 1]");
  if (!(p.min_p >= 0 && p.min_p <= 1)) throw Error("min_p must be in [0, 1]");
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (params_.temperature == 0) return argmax(logits);

  candidates_.clear();
  for (size_t i = 0; i < logits.size(); ++i) candidates_.emplace_back(logits[i], static_cast<int32_t>(i));
  // Highest logit first; equal logits keep id order so the draw is reproducible.
  auto by_logit = [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; };
  size_t keep = candidates_.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) {
    keep = static_cast<size_t>(params_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<long>(keep), candidates_.end(), by_logit);
    candidates_.resize(keep);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }

  // Softmax of logit / temperature, in place (first = probability from here on).
  const double max_logit = candidates_.front().first;
  double total = 0;
  for (auto& c : candidates_) {
    c.first = static_cast<float>(std::exp((c.first - max_logit) / params_.temperature));
    total += c.first;
  }
  for (auto& c : candidates_) c.first = static_cast<float>(c.first / total);

  if (params_.top_p < 1.0) {
    // The smallest set reaching top_p, never empty: top_p 0 keeps the most likely token (greedy).
    double cumulative = 0;
    size_t n = 0;
    while (n < candidates_.size() && cumulative < params_.top_p) cumulative += candidates_[n++].first;
    candidates_.resize(std::max<size_t>(n, 1));
  }
  if (params_.min_p > 0) {
    const double floor = params_.min_p * candidates_.front().first;
    size_t n = 1;
    while (n < candidates_.size() && candidates_[n].first >= floor) ++n;
    candidates_.resize(n);
  }

  double mass = 0;
  for (const auto& c : candidates_) mass += c.first;
  double r = std::uniform_real_distribution<double>(0.0, mass)(rng_);
  for (const auto& c : candidates_) {
    r -= c.first;
    if (r < 0) return c.second;
  }
  // Rounding left r at or above 0: the last candidate that can be drawn (a masked id has
  // probability 0 and sorts last).
  for (auto it = candidates_.rbegin(); it != candidates_.rend(); ++it)
    if (it->first > 0) return it->second;
  return candidates_.front().second;
}

void mask_logits(std::span<float> logits, std::span<const int32_t> ids) {
  for (int32_t id : ids)
    if (id >= 0 && static_cast<size_t>(id) < logits.size()) logits[static_cast<size_t>(id)] = -std::numeric_limits<float>::infinity();
}

}  // namespace keel
