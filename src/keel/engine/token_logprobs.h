#pragma once
// Log probabilities of sampled tokens (OpenAI logprobs / top_logprobs): the log-softmax of the
// logits the sampler drew from, after logit_bias, the penalties and the masks (padding rows, a
// grammar) and before temperature, top_k, top_p and min_p, which OpenAI's numbers do not reflect
// either. A masked token has probability 0 and is never listed.
//
// Threads: pure functions.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace keel {

struct TokenChoice {
  int32_t id = 0;
  std::string bytes;     // what the token writes mid-output (text::Tokenizer::token_bytes)
  double logprob = 0;    // natural log; kLeastLogprob when the token has probability 0
};

struct TokenLogprob {
  TokenChoice token;             // the token written
  std::vector<TokenChoice> top;  // the most likely ones, most likely first (ties: lower id first)
};

// What a token of probability 0 is reported with (a forced token the model rules out): JSON has
// no -infinity, and OpenAI uses this value for tokens it does not rank.
inline constexpr double kLeastLogprob = -9999.0;

// The log-softmax of `logits` at `id` and the `top` most likely ids with theirs (fewer when fewer
// are finite). Bytes are left empty for the caller.
TokenLogprob token_logprob(std::span<const float> logits, int32_t id, int top);

}  // namespace keel
