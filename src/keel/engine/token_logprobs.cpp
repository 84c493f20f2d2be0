#include "keel/engine/token_logprobs.h"

#include <algorithm>
#include <cmath>

namespace keel {

TokenLogprob token_logprob(std::span<const float> logits, int32_t id, int top) {
  float max_logit = -INFINITY;
  for (float l : logits) max_logit = std::max(max_logit, l);
  // Summed in double: 151k terms in float would lose the small ones.
  double total = 0;
  for (float l : logits)
    if (l != -INFINITY) total += std::exp(static_cast<double>(l) - max_logit);
  const double log_total = static_cast<double>(max_logit) + std::log(total);
  auto logprob = [&](int32_t i) {
    const float l = logits[static_cast<size_t>(i)];
    return l == -INFINITY || !std::isfinite(log_total) ? kLeastLogprob : std::max(kLeastLogprob, l - log_total);
  };

  TokenLogprob out;
  out.token = {id, {}, logprob(id)};
  if (top <= 0) return out;
  // The `top` best finite logits, highest first, ties to the lower id: a bounded min-heap pass.
  auto better = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la != lb ? la > lb : a < b;
  };
  std::vector<int32_t> best;
  best.reserve(static_cast<size_t>(top) + 1);
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] == -INFINITY) continue;
    const auto candidate = static_cast<int32_t>(i);
    if (best.size() == static_cast<size_t>(top) && !better(candidate, best.front())) continue;
    best.push_back(candidate);
    std::push_heap(best.begin(), best.end(), better);
    if (best.size() > static_cast<size_t>(top)) {
      std::pop_heap(best.begin(), best.end(), better);
      best.pop_back();
    }
  }
  std::sort(best.begin(), best.end(), better);
  for (int32_t i : best) out.top.push_back({i, {}, logprob(i)});
  return out;
}

}  // namespace keel
