#pragma once
// Picks the next token from logits. Temperature 0 is greedy (argmax, ties to the lowest id).
// Otherwise: scale by 1/temperature, keep the top_k most likely, keep the smallest set whose
// probability reaches top_p (at least one token, so top_p 0 is greedy as both APIs' [0, 1] range
// allows), drop tokens below min_p times the most likely one's probability, renormalise and draw. The random stream comes only from `seed`, so a seed replays exactly.
//
// Threads: a Sampler holds its random stream and scratch, so one thread at a time (the thread that
// runs the turn); separate Samplers are independent. argmax is pure.
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace keel {

struct SamplingParams {
  double temperature = 0.0;
  int64_t top_k = 0;    // 0 = off
  double top_p = 1.0;   // 1 = off, 0 = the most likely token only
  double min_p = 0.0;   // 0 = off
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);  // throws keel::Error on out-of-range values
  int32_t sample(std::span<const float> logits);

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;
};

int32_t argmax(std::span<const float> logits);

// Sets the logits of `ids` to -infinity, so neither greedy nor any sampling picks them.
void mask_logits(std::span<float> logits, std::span<const int32_t> ids);

}  // namespace keel
