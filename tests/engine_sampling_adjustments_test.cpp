// logit_bias and the presence, frequency and repetition penalties (TurnOptions), as OpenAI and
// Hugging Face define them: a scripted model prefers token A (logit 5) over B (logit 4) at every step, greedy, and the adjustments
// decide what it writes, token by token.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "keel/engine/chat_turn.h"
#include "keel/kv/kv_footprint.h"
#include "server_support.h"

namespace keel::test {
namespace {

struct Pair {
  int32_t a, b;
};

Pair tokens() {
  const text::Tokenizer& tok = tiny_served_model().tokenizer();
  return {tok.encode("x").front(), tok.encode("y").front()};
}

// The letters written: "x" for A, "y" for B.
std::string run(TurnOptions o, const char* user = "Write.") {
  ServedModel& model = tiny_served_model();
  const Pair p = tokens();
  o.max_tokens = 6;
  o.sampling.temperature = 0;
  o.logits_processor = [p](std::span<const int32_t>, std::span<float> logits) {
    for (float& l : logits) l = 0.0f;
    logits[static_cast<size_t>(p.a)] = 5.0f;
    logits[static_cast<size_t>(p.b)] = 4.0f;
  };
  const PreparedPrompt prompt =
      model.prepare(nlohmann::ordered_json{{{"role", "user"}, {"content", user}}}, nullptr, false);
  const ModelSpec& spec = model.weights().spec;
  SessionCache session(spec, static_cast<int64_t>(kv::kv_bytes_per_token(spec, kv::KvPolicy(), 1024) * 1024) * 2,
                       kv::KvPolicy(), true, 1024);
  std::string text;
  run_turn(model, session, prompt, o, [&](TurnEvent&& e) { text += e.text; });
  return text;
}

TEST(EngineSamplingAdjustments, PenaltiesAndBiasesFollowOpenAIsDefinition) {
  EXPECT_EQ(run({}), "xxxxxx");
  TurnOptions presence;
  presence.presence_penalty = 2;  // A: 5 -> 3 once written; B: 4 -> 2 once written
  EXPECT_EQ(run(presence), "xyxxxx");
  TurnOptions frequency;
  frequency.frequency_penalty = 0.6f;  // each occurrence costs 0.6 more
  EXPECT_EQ(run(frequency), "xxyxyx");
  TurnOptions negative;
  negative.presence_penalty = -2;  // a negative penalty rewards repetition
  EXPECT_EQ(run(negative), "xxxxxx");
  TurnOptions bias;
  bias.logit_bias = {{tokens().b, 2.0f}};
  EXPECT_EQ(run(bias), "yyyyyy");
  TurnOptions ban;
  ban.logit_bias = {{tokens().a, -100.0f}};
  EXPECT_EQ(run(ban), "yyyyyy");
}

// Hugging Face's and vLLM's definition: a token of the prompt or the output so far has a positive
// logit divided by the penalty (a negative one multiplied), however often it occurs.
TEST(EngineSamplingAdjustments, RepetitionPenaltyCountsThePromptToo) {
  TurnOptions o;
  o.repetition_penalty = 2;  // A: 5 -> 2.5 once written; B: 4 -> 2
  EXPECT_EQ(run(o), "xyxxxx");
  EXPECT_EQ(run(o, "x"), "yxxxxx");  // A is in the prompt: penalised from the first token
  o.repetition_penalty = 0.5f;       // below 1 it rewards repetition
  EXPECT_EQ(run(o, "y"), "yyyyyy");
}

}  // namespace
}  // namespace keel::test
