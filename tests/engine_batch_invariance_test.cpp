// Batch invariance (docs/architecture.md): a sequence's logits are bit-identical whether its
// tokens run alone or in one forward pass beside other sequences' prefill chunks and decode
// tokens, for every family and KV policy. This is what lets the scheduler batch requests without
// changing any request's tokens.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "keel/arch/model_loader.h"
#include "keel/arch/transformer.h"
#include "keel/engine/forward_loop.h"
#include "keel/kv/kv_pool.h"
#include "keel/model/weights.h"
#include "test_support.h"

namespace keel {
namespace {

using chat::Role;

// One sequence's script: a prompt prefilled in chunks, then greedy decode steps. What it runs in
// each step is the same alone or batched, so each step's logits can be compared.
struct Script {
  std::vector<int32_t> ids;
  std::vector<Role> roles;
  int64_t chunk = 0;
  int decode_steps = 0;
};

Script random_script(std::mt19937& rng, int64_t vocab, int64_t length, int64_t chunk, int decode_steps) {
  Script s;
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab - 1));
  std::uniform_int_distribution<int> role(0, static_cast<int>(chat::kRoleCount) - 1);
  for (int64_t i = 0; i < length; ++i) {
    s.ids.push_back(token(rng));
    s.roles.push_back(i % 24 == 0 ? static_cast<Role>(role(rng)) : (s.roles.empty() ? Role::system : s.roles.back()));
  }
  s.chunk = chunk;
  s.decode_steps = decode_steps;
  return s;
}

// Drives one sequence step by step: each step() names the tokens of its next pass; done() once
// the prompt is in and every decode step has run.
class Runner {
 public:
  Runner(const Script& script, kv::KvPool& pool, int64_t vocab)
      : script_(script), seq_(pool.open({}, {})), logits_(static_cast<size_t>(vocab)) {}

  bool done() const { return decoded_ >= script_.decode_steps && at_ >= static_cast<int64_t>(script_.ids.size()); }

  // The sequence's share of the next pass.
  SequencePass next() {
    const auto n = static_cast<int64_t>(script_.ids.size());
    if (at_ < n) {
      const int64_t len = std::min(script_.chunk, n - at_);
      tokens_.assign(script_.ids.begin() + at_, script_.ids.begin() + at_ + len);
      roles_.assign(script_.roles.begin() + at_, script_.roles.begin() + at_ + len);
      at_ += len;
      row_ = len - 1;
    } else {
      // Greedy on the last logits: the sampled token depends on them, so a difference anywhere
      // before changes everything after.
      tokens_ = {static_cast<int32_t>(std::max_element(logits_.begin(), logits_.end()) - logits_.begin())};
      roles_ = {Role::assistant};
      ++decoded_;
      row_ = 0;
    }
    return SequencePass{seq_.get(), tokens_, roles_, std::span<const int64_t>(&row_, 1), logits_};
  }

  // After the pass: the step's logits join the record.
  void record() { history_.insert(history_.end(), logits_.begin(), logits_.end()); }
  const std::vector<float>& history() const { return history_; }

 private:
  const Script& script_;
  std::unique_ptr<kv::KvSequence> seq_;
  std::vector<float> logits_;
  std::vector<int32_t> tokens_;
  std::vector<Role> roles_;
  int64_t row_ = 0;
  int64_t at_ = 0;
  int decoded_ = 0;
  std::vector<float> history_;
};

std::vector<float> run_alone(Transformer& model, kv::KvPool& pool, const Script& script) {
  Runner r(script, pool, model.spec().vocab_size);
  while (!r.done()) {
    const SequencePass pass = r.next();
    run_pass(model, std::span(&pass, 1));
    r.record();
  }
  return r.history();
}

// All scripts at once: each pass carries one step of every sequence that still has one, so
// prefill chunks of one run beside decode tokens of another.
std::vector<std::vector<float>> run_batched(Transformer& model, kv::KvPool& pool, const std::vector<Script>& scripts) {
  std::vector<std::unique_ptr<Runner>> runners;
  for (const Script& s : scripts) runners.push_back(std::make_unique<Runner>(s, pool, model.spec().vocab_size));
  while (true) {
    std::vector<SequencePass> batch;
    std::vector<Runner*> in_batch;
    for (auto& r : runners)
      if (!r->done()) {
        batch.push_back(r->next());
        in_batch.push_back(r.get());
      }
    if (batch.empty()) break;
    run_pass(model, batch);
    for (Runner* r : in_batch) r->record();
  }
  std::vector<std::vector<float>> out;
  for (auto& r : runners) out.push_back(r->history());
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Case {
  const char* model;
  const char* policy;
};

class BatchInvariance : public ::testing::TestWithParam<Case> {};

TEST_P(BatchInvariance, EverySequenceGetsTheLogitsItGetsAlone) {
  const Case c = GetParam();
  const ModelWeights weights = arch::load_model(test::shared_dir() / "models" / c.model);
  ThreadPool threads(2);
  Transformer model(weights, threads);
  const kv::KvPolicy policy = kv::KvPolicy::parse(c.policy);
  std::mt19937 rng(7);
  const int64_t vocab = weights.spec.vocab_size;
  // Lengths past a block boundary and the recent window, chunks that do not divide them, and
  // decode runs of different lengths, so the batch mixes every kind of step.
  const std::vector<Script> scripts = {random_script(rng, vocab, 300, 64, 6), random_script(rng, vocab, 37, 16, 20),
                                       random_script(rng, vocab, 129, 128, 3), random_script(rng, vocab, 5, 5, 12)};
  std::vector<std::vector<float>> alone;
  {
    kv::KvPool pool(weights.spec, int64_t{256} << 20, policy, true, 4096);
    for (const Script& s : scripts) alone.push_back(run_alone(model, pool, s));
  }
  kv::KvPool pool(weights.spec, int64_t{256} << 20, policy, true, 4096);
  const auto batched = run_batched(model, pool, scripts);
  for (size_t i = 0; i < scripts.size(); ++i)
    EXPECT_TRUE(same_bits(alone[i], batched[i])) << c.model << " under " << c.policy << ": sequence " << i;
}

INSTANTIATE_TEST_SUITE_P(
    ModelsAndPolicies, BatchInvariance,
    ::testing::Values(Case{"tiny-toolcaller", "full"}, Case{"tiny-toolcaller", "int8"},
                      Case{"tiny-toolcaller", "protect"}, Case{"tiny-toolcaller-mlx4", "int4"},
                      Case{"tiny-qwen3moe-random", "protect"}, Case{"tiny-gptoss-random", "int8"},
                      Case{"tiny-gemma3-random", "protect"}, Case{"tiny-gemma4-random", "full"},
                      Case{"tiny-llama3-random", "int8"}, Case{"tiny-qwen3next-random", "full"},
                      Case{"tiny-qwen3next-random", "int8"}, Case{"tiny-qwen3next-random", "protect"},
                      Case{"gguf/tiny-toolcaller-Q4_0.gguf", "full"}, Case{"gguf/tiny-toolcaller-Q4_K_M.gguf", "int8"}),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string name = std::string(info.param.model) + "_" + info.param.policy;
      for (char& ch : name)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

}  // namespace
}  // namespace keel
