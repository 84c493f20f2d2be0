#pragma once
// Random conversations run through a KV pool, shared by the tests of prefix reuse (RAM and disk):
// token ids and role runs, a model to run them on, a forward pass over the rest of a conversation in chunks, and the fresh
// prefill every reuse must reproduce bit for bit. Test-only; one test thread.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "keel/arch/model_loader.h"
#include "keel/arch/transformer.h"
#include "keel/engine/forward_loop.h"
#include "keel/chat/chat_roles.h"
#include "keel/kv/kv_pool.h"
#include "test_support.h"

namespace keel::kv::reuse {

using chat::Role;

struct Conversation {
  std::vector<int32_t> ids;
  std::vector<Role> roles;
  int64_t size() const { return static_cast<int64_t>(ids.size()); }
  Conversation prefix(int64_t n) const {
    return {std::vector<int32_t>(ids.begin(), ids.begin() + n), std::vector<Role>(roles.begin(), roles.begin() + n)};
  }
};

// Appends `n` random tokens in runs of one role each (1 to 40 tokens per run).
inline void add_random_turns(Conversation& c, std::mt19937& rng, int64_t n, int64_t vocab) {
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab - 1));
  std::uniform_int_distribution<int> role(0, static_cast<int>(chat::kRoleCount) - 1), run(1, 40);
  const int64_t end = c.size() + n;
  while (c.size() < end) {
    const auto r = static_cast<Role>(role(rng));
    for (int i = run(rng); i > 0 && c.size() < end; --i) {
      c.ids.push_back(token(rng));
      c.roles.push_back(r);
    }
  }
}

inline Conversation random_conversation(std::mt19937& rng, int64_t n, int64_t vocab) {
  Conversation c;
  add_random_turns(c, rng, n, vocab);
  return c;
}

// Runs c's tokens from seq.size() on, `chunk` per forward pass; the logits after the last one.
inline std::vector<float> run_rest(Transformer& model, KvSequence& seq, const Conversation& c, int64_t chunk) {
  std::vector<float> logits(static_cast<size_t>(model.spec().vocab_size));
  for (int64_t at = seq.size(); at < c.size(); at += chunk) {
    const auto len = static_cast<size_t>(std::min(chunk, c.size() - at));
    const auto ids = std::span<const int32_t>(c.ids).subspan(static_cast<size_t>(at), len);
    const int64_t row = static_cast<int64_t>(len) - 1;
    const bool last = at + static_cast<int64_t>(len) == c.size();
    forward_tokens(model, seq, ids, std::span<const Role>(c.roles).subspan(static_cast<size_t>(at), len),
                   last ? std::span<const int64_t>(&row, 1) : std::span<const int64_t>(), logits);
  }
  return logits;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

inline constexpr int64_t kBudget = int64_t{64} << 20;

// A shared model folder loaded with a transformer of its own on two threads.
struct Model {
  explicit Model(const char* name) : weights(arch::load_model(test::shared_dir() / "models" / name)), model(weights, pool) {}
  ModelWeights weights;
  ThreadPool pool{2};
  Transformer model;
};

// A fresh pool with nothing cached: the reference every reuse must reproduce bit for bit.
inline std::vector<float> fresh_logits(Transformer& model, const KvPolicy& policy, const Conversation& c) {
  KvPool pool(model.spec(), kBudget, policy, true);
  auto seq = pool.open(c.ids, c.roles);
  EXPECT_EQ(seq->size(), 0);
  return run_rest(model, *seq, c, c.size());
}

// Every preset with a recent window small enough that blocks leave it (protect-k: early keys bf16,
// their values int4), plus int2 (eval's deliberately broken arm).
inline std::vector<KvPolicy> policies() {
  return {KvPolicy::parse("full"), KvPolicy::parse("int8"), KvPolicy::parse("int4"),
          KvPolicy::parse("protect").with_recent(32), KvPolicy::parse("protect-k").with_recent(32),
          KvPolicy::parse("default=int2 tool_call=int8 sink=4 recent=32")};
}

}  // namespace keel::kv::reuse
