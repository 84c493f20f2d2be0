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

  // A masked token (-infinity) has no chance and is no candidate.
  candidates_.resize(logits.size());
  size_t count = 0;
  float max_logit = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) {
    candidates_[count] = {logits[i], static_cast<int32_t>(i)};
    count += logits[i] != -std::numeric_limits<float>::infinity();
    max_logit = std::max(max_logit, logits[i]);
  }
  candidates_.resize(count);
  if (candidates_.empty()) return argmax(logits);

  // Most likely first; equal values keep id order. top_k, top_p and min_p keep a prefix of this
  // order, but only as far as they go, usually a few dozen of 150k: candidates_[0, ordered) is in
  // order and the rest is put in order on demand, a doubling chunk at a time (sorting the whole
  // vocabulary took longer than a decode step).
  auto before = [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; };
  size_t ordered = 0;
  auto order_through = [&](size_t n) {
    n = std::min(std::max(n, 2 * ordered + 64), candidates_.size());
    if (n <= ordered) return;
    const auto first = candidates_.begin() + static_cast<long>(ordered), last = candidates_.begin() + static_cast<long>(n);
    std::partial_sort(first, last, candidates_.end(), before);
    ordered = n;
  };
  auto at = [&](size_t i) -> const std::pair<float, int32_t>& {
    if (i >= ordered) order_through(i + 1);
    return candidates_[i];
  };

  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < candidates_.size()) {
    order_through(static_cast<size_t>(params_.top_k));
    candidates_.resize(static_cast<size_t>(params_.top_k));
    ordered = std::min(ordered, candidates_.size());
  }

  // Weights exp((logit - max) / temperature), in place (first = weight from here on); exp keeps
  // the order, so what is ordered stays so. They are not normalised: the cuts and the draw scale
  // by their total instead.
  const float inverse_temperature = static_cast<float>(1.0 / params_.temperature);
  double total = 0;
  for (auto& c : candidates_) {
    c.first = std::exp((c.first - max_logit) * inverse_temperature);
    total += c.first;
  }

  size_t keep = candidates_.size();
  double mass = total;  // of the kept candidates
  if (params_.top_p < 1.0) {
    // The smallest set reaching top_p, never empty: top_p 0 keeps the most likely token (greedy).
    const double reach = params_.top_p * total;
    double cumulative = 0;
    size_t n = 0;
    while (n < keep && cumulative < reach) cumulative += at(n++).first;
    keep = std::max<size_t>(n, 1);
    mass = n == 0 ? at(0).first : cumulative;
  }
  if (params_.min_p > 0) {
    const double floor = params_.min_p * at(0).first;
    double kept = at(0).first;
    size_t n = 1;
    while (n < keep && at(n).first >= floor) kept += candidates_[n++].first;
    if (n < keep) mass = kept;
    keep = n;
  }

  // Each kept candidate once, in whatever order they are: the chance of each is its weight over
  // the mass in any order, and the order is the same for the same logits, so a seed replays.
  double r = std::uniform_real_distribution<double>(0.0, mass)(rng_);
  for (size_t i = 0; i < keep; ++i) {
    r -= candidates_[i].first;
    if (r < 0) return candidates_[i].second;
  }
  // Rounding left r at or above 0: the last candidate that can be drawn.
  for (size_t i = keep; i-- > 0;)
    if (candidates_[i].first > 0) return candidates_[i].second;
  return candidates_.front().second;
}

void mask_logits(std::span<float> logits, std::span<const int32_t> ids) {
  for (int32_t id : ids)
    if (id >= 0 && static_cast<size_t>(id) < logits.size()) logits[static_cast<size_t>(id)] = -std::numeric_limits<float>::infinity();
}

}  // namespace keel
