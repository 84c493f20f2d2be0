// OpenAI logprobs as a turn reports them (token_logprobs.h): the log-softmax of the logits the
// sampler drew from. Checked against the fp32 reference logits of the bundled tool caller, and
// against a scripted distribution after a mask, where the reported probabilities must renormalise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <vector>

#include <nlohmann/json.hpp>

#include "keel/engine/chat_turn.h"
#include "keel/kv/kv_footprint.h"
#include "server_support.h"
#include "test_support.h"

namespace keel::test {
namespace {

SessionCache fresh_session(const ServedModel& model) {
  const ModelSpec& spec = model.weights().spec;
  return SessionCache(spec, static_cast<int64_t>(kv::kv_bytes_per_token(spec, kv::KvPolicy(), 1024) * 1024) * 2,
                      kv::KvPolicy(), true, 1024);
}

// The turn's logprobs events, joined.
std::vector<TokenLogprob> logprobs_of(const PreparedPrompt& prompt, TurnOptions o) {
  ServedModel& model = tiny_served_model();
  SessionCache session = fresh_session(model);
  std::vector<TokenLogprob> out;
  run_turn(model, session, prompt, o, [&](TurnEvent&& e) {
    if (e.kind == TurnEvent::Kind::Logprobs) out.insert(out.end(), e.logprobs.begin(), e.logprobs.end());
  });
  return out;
}

std::vector<double> log_softmax(const nlohmann::json& row) {
  std::vector<double> l = row.get<std::vector<double>>();
  const double top = *std::max_element(l.begin(), l.end());
  double total = 0;
  for (double x : l) total += std::exp(x - top);
  for (double& x : l) x -= top + std::log(total);
  return l;
}

TEST(EngineLogprobs, MatchTheReferenceLogSoftmaxOfTheNextToken) {
  std::ifstream in(shared_dir() / "fixtures/golden/tiny-toolcaller.logits.json");
  const auto golden = nlohmann::json::parse(in);
  // Logits differ from the reference by up to the tolerance, so log-softmax values by up to twice it.
  const double tolerance = 2 * golden["tolerance_max_abs"].get<double>();
  int checked = 0;
  for (const auto& c : golden["cases"]) {
    const auto tokens = c["tokens"].get<std::vector<int32_t>>();
    const auto positions = c["positions"].get<std::vector<int64_t>>();
    for (size_t k = 0; k < positions.size(); ++k) {
      const std::vector<double> reference = log_softmax(c["logits"][k]);
      PreparedPrompt prompt;
      prompt.ids.assign(tokens.begin(), tokens.begin() + positions[k] + 1);
      prompt.roles.assign(prompt.ids.size(), chat::Role::user);
      TurnOptions o;
      o.max_tokens = 1;
      o.sampling.temperature = 0;
      o.top_logprobs = 20;
      const std::vector<TokenLogprob> got = logprobs_of(prompt, o);
      if (got.empty()) continue;  // the model ended its output there: no token to report
      ASSERT_EQ(got.size(), 1u);
      const TokenLogprob& t = got[0];
      EXPECT_NEAR(t.token.logprob, reference[static_cast<size_t>(t.token.id)], tolerance);
      ASSERT_EQ(t.top.size(), 20u);
      EXPECT_EQ(t.top[0].id, t.token.id);  // greedy took the most likely
      std::vector<double> sorted = reference;
      std::sort(sorted.rbegin(), sorted.rend());
      double mass = 0;
      for (size_t i = 0; i < t.top.size(); ++i) {
        EXPECT_NEAR(t.top[i].logprob, reference[static_cast<size_t>(t.top[i].id)], tolerance) << "alternative " << i;
        EXPECT_NEAR(t.top[i].logprob, sorted[i], tolerance) << "the " << i << "th most likely";
        if (i > 0) { EXPECT_LE(t.top[i].logprob, t.top[i - 1].logprob); }
        EXPECT_EQ(t.top[i].bytes, tiny_served_model().tokenizer().token_bytes(t.top[i].id));
        mass += std::exp(t.top[i].logprob);
      }
      EXPECT_LE(mass, 1.0 + 1e-9);
      ++checked;
    }
  }
  EXPECT_GE(checked, 4);
}

// With only three tokens left by the masks, their reported probabilities are a distribution of
// their own, the bias included, and no other token is listed.
TEST(EngineLogprobs, RenormaliseOverWhatTheMasksLeave) {
  ServedModel& model = tiny_served_model();
  const text::Tokenizer& tok = model.tokenizer();
  const int32_t a = tok.encode("x").front(), b = tok.encode("y").front(), c = tok.encode("z").front();
  TurnOptions o;
  o.max_tokens = 4;
  o.sampling.temperature = 1;
  o.sampling.seed = 3;
  o.top_logprobs = 5;
  o.logit_bias = {{c, 1.0f}};
  o.logits_processor = [&](std::span<const int32_t>, std::span<float> logits) {
    std::fill(logits.begin(), logits.end(), -INFINITY);
    logits[static_cast<size_t>(a)] = 2.0f;
    logits[static_cast<size_t>(b)] = 1.0f;
    logits[static_cast<size_t>(c)] = 0.0f;  // 1 with the bias
  };
  const PreparedPrompt prompt = model.prepare(nlohmann::ordered_json::parse(R"([{"role":"user","content":"Write."}])"), nullptr, false);
  const std::vector<TokenLogprob> got = logprobs_of(prompt, o);
  ASSERT_EQ(got.size(), 4u);
  const double log_total = std::log(std::exp(2.0) + 2 * std::exp(1.0));
  for (const TokenLogprob& t : got) {
    ASSERT_EQ(t.top.size(), 3u);
    EXPECT_EQ(t.top[0].id, a);
    EXPECT_EQ(t.top[1].id, std::min(b, c));  // b and c tie: the lower id first
    EXPECT_NEAR(t.top[0].logprob, 2.0 - log_total, 1e-6);
    EXPECT_NEAR(t.top[1].logprob, 1.0 - log_total, 1e-6);
    EXPECT_NEAR(t.top[2].logprob, 1.0 - log_total, 1e-6);
    double mass = 0;
    for (const TokenChoice& ch : t.top) mass += std::exp(ch.logprob);
    EXPECT_NEAR(mass, 1.0, 1e-9);
    EXPECT_TRUE(t.token.id == a || t.token.id == b || t.token.id == c);
  }
}

}  // namespace
}  // namespace keel::test
