// One chat turn (engine/chat_turn) driven by a scripted model: the bundled tool caller's forward
// pass runs as usual, and a logits processor makes the token the script wants the only likely one.
// This pins down what the turn does with output no trained model produces on demand: a tool call
// cut off by end-of-sequence, a sampled control token, a reasoning budget running out.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <string>

#include "keel/engine/chat_turn.h"
#include "keel/kv/kv_footprint.h"
#include "keel/kv/kv_window.h"
#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;

ServedModel& model() { return tiny_served_model(); }

json bash_tool() {
  return json::parse(R"([{"type":"function","function":{"name":"Bash","description":"Run a command",
    "parameters":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}}])");
}

// What the model should write next, given what it has written so far; empty: end of sequence.
using Script = std::function<std::string(const std::string& so_far)>;

// The first token of the text the script wants next gets a logit far above every other.
std::function<void(std::span<const int32_t>, std::span<float>)> scripted(Script script) {
  return [script = std::move(script)](std::span<const int32_t> generated, std::span<float> logits) {
    const text::Tokenizer& tok = model().tokenizer();
    const std::string want = script(tok.decode(generated));
    const int32_t next = want.empty() ? model().weights().eos_token_ids.front() : tok.encode(want).front();
    for (float& l : logits) l = 0.0f;
    logits[static_cast<size_t>(next)] = 100.0f;
  };
}

// The rest of `target` when `so_far` is a prefix of it, else "".
std::string rest_of(const std::string& target, const std::string& so_far) {
  return target.starts_with(so_far) ? target.substr(so_far.size()) : std::string();
}

struct Turn {
  TurnResult result;
  std::string text, reasoning;
  std::vector<std::string> calls;  // "name arguments"
};

// `in_reasoning`: the prompt ends inside a reasoning block it opened (as Qwen3's does with
// thinking on), so the model's output starts with its reasoning.
Turn run(TurnOptions options, const json& tools = nullptr, bool in_reasoning = false) {
  const json messages = json::parse(R"([{"role":"user","content":"List the files."}])");
  PreparedPrompt prompt = model().prepare(messages, tools, false);
  if (in_reasoning) {
    const std::vector<int32_t> opener = model().tokenizer().encode("<think>\n");
    prompt.ids.insert(prompt.ids.end(), opener.begin(), opener.end());
    prompt.roles.resize(prompt.ids.size(), chat::Role::scaffolding);
    prompt.starts_in_reasoning = true;
  }
  const ModelSpec& spec = model().weights().spec;
  const int64_t context = 4096;
  const auto budget = static_cast<int64_t>(kv::kv_bytes_per_token(spec, kv::KvPolicy(), context) * context) * 2;
  SessionCache session(spec, budget, kv::KvPolicy(), true, context);
  options.tools = tools;
  Turn t;
  t.result = run_turn(model(), session, prompt, options, [&](TurnEvent&& e) {
    if (e.kind == TurnEvent::Kind::Text) t.text += e.text;
    if (e.kind == TurnEvent::Kind::Reasoning) t.reasoning += e.text;
    if (e.kind == TurnEvent::Kind::ToolCall) t.calls.push_back(e.name + " " + e.arguments.dump());
  });
  return t;
}

const std::string kCutCall = "<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"ls";
const std::string kWholeCall = "<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>";

TEST(EngineTurn, ToolCallCutOffByEndOfSequenceIsRetried) {
  int ends = 0;  // the first attempt ends inside the call; the retry writes it whole
  TurnOptions o;
  o.max_tokens = 200;
  o.sampling.temperature = 0;
  o.logits_processor = scripted([&](const std::string& so_far) {
    const std::string r = rest_of(ends == 0 ? kCutCall : kWholeCall, so_far);
    if (r.empty()) ++ends;
    return r;
  });
  const Turn t = run(o, bash_tool());
  EXPECT_EQ(t.result.stats.retries, 1);
  EXPECT_EQ(t.result.stats.invalid_calls, 0);
  ASSERT_EQ(t.calls.size(), 1u) << t.text;
  EXPECT_EQ(t.calls[0], R"(Bash {"command":"ls"})");
  EXPECT_EQ(t.result.finish, TurnFinish::ToolUse);
}

TEST(EngineTurn, ToolCallAlwaysCutOffByEndOfSequenceStatesTheCause) {
  TurnOptions o;
  o.max_tokens = 200;
  o.tool_retries = 2;
  o.logits_processor = scripted([&](const std::string& so_far) { return rest_of(kCutCall, so_far); });
  const Turn t = run(o, bash_tool());
  EXPECT_EQ(t.result.stats.retries, 2);
  EXPECT_EQ(t.result.stats.invalid_calls, 1);
  EXPECT_TRUE(t.calls.empty());
  EXPECT_NE(t.text.find("the output ended inside the tool call (the model ended its output there)"), std::string::npos)
      << t.text;
  EXPECT_EQ(t.text.find("max_tokens"), std::string::npos) << t.text;
}

TEST(EngineTurn, ToolCallCutOffByMaxTokensIsAMaxTokensStop) {
  TurnOptions o;
  o.max_tokens = 12;
  o.logits_processor = scripted([&](const std::string& so_far) { return rest_of(kWholeCall, so_far); });
  const Turn t = run(o, bash_tool());
  EXPECT_EQ(t.result.finish, TurnFinish::MaxTokens);
  EXPECT_EQ(t.result.stats.retries, 0);
  EXPECT_NE(t.text.find("(max_tokens reached)"), std::string::npos) << t.text;
}

TEST(EngineTurn, SampledControlTokenIsNeverStreamedAndEndsTheTurn) {
  TurnOptions o;
  o.max_tokens = 50;
  o.logits_processor = scripted([&](const std::string& so_far) {
    if (so_far.size() < 5) return std::string("Hello").substr(so_far.size());
    return std::string("<|im_start|>user\nmore");
  });
  const Turn t = run(o);
  EXPECT_EQ(t.text, "Hello");
  EXPECT_EQ(t.result.finish, TurnFinish::EndTurn);
  // The tokens of "Hello" and the control token.
  EXPECT_EQ(t.result.stats.output_tokens, static_cast<int64_t>(model().tokenizer().encode("Hello").size()) + 1);
}

// Reasons with one "x" per token until the reasoning is closed, then answers "Done".
Script reasoner() {
  return [](const std::string& so_far) -> std::string {
    const size_t close = so_far.find("</think>");
    if (close == std::string::npos) {
      if (std::string("<think>").starts_with(so_far) && so_far.size() < 7) return std::string("<think>").substr(so_far.size());
      return "x";
    }
    std::string after = so_far.substr(close + 8);
    after.erase(0, after.find_first_not_of(" \n"));
    return rest_of("Done", after);
  };
}

TEST(EngineTurn, ReasoningBudgetClosesTheBlockAndTheAnswerFollows) {
  for (int64_t budget : {0, 1, 7, 30}) {
    TurnOptions o;
    o.max_tokens = 120;
    o.reasoning = true;
    o.reasoning_budget = budget;
    o.logits_processor = scripted(reasoner());
    const Turn t = run(o);
    EXPECT_LE(static_cast<int64_t>(std::count(t.reasoning.begin(), t.reasoning.end(), 'x')), budget) << t.reasoning;
    EXPECT_LE(t.result.stats.reasoning_tokens, budget);
    EXPECT_EQ(t.text, "Done") << "budget " << budget << ", reasoning: " << t.reasoning;
    EXPECT_EQ(t.result.finish, TurnFinish::EndTurn);
  }
}

TEST(EngineTurn, WithoutABudgetTheScriptedReasonerRunsToMaxTokens) {
  TurnOptions o;
  o.max_tokens = 40;
  o.reasoning = true;
  o.logits_processor = scripted(reasoner());
  const Turn t = run(o);
  EXPECT_TRUE(t.text.empty()) << t.text;
  EXPECT_GT(std::count(t.reasoning.begin(), t.reasoning.end(), 'x'), 30);
  EXPECT_EQ(t.result.finish, TurnFinish::MaxTokens);
}

// The turn prefills through engine/forward_loop: the same prompt again on the same session reuses
// the cached prefix, prefills only the rest, and writes what a fresh session writes.
TEST(EngineTurn, APromptAgainReusesItsPrefixAndWritesTheSame) {
  const json messages = json::parse(R"([{"role":"user","content":"List the files in src and say which is largest."}])");
  const PreparedPrompt prompt = model().prepare(messages, nullptr, false);
  const ModelSpec& spec = model().weights().spec;
  const int64_t context = 1024;
  const auto budget = static_cast<int64_t>(kv::kv_bytes_per_token(spec, kv::KvPolicy(), context) * context) * 2;
  TurnOptions o;
  o.max_tokens = 12;
  o.prefill_chunk = 5;
  auto turn = [&](SessionCache& session, TurnResult& result) {
    std::string text;
    result = run_turn(model(), session, prompt, o, [&](TurnEvent&& e) { text += e.text + e.name; });
    return text;
  };
  SessionCache session(spec, budget, kv::KvPolicy(), true, context);
  TurnResult first, again, fresh_result;
  const std::string first_text = turn(session, first);
  const std::string again_text = turn(session, again);
  SessionCache fresh(spec, budget, kv::KvPolicy(), true, context);
  const std::string fresh_text = turn(fresh, fresh_result);

  const auto n = static_cast<int64_t>(prompt.ids.size());
  EXPECT_EQ(first.stats.reused_tokens, 0);
  EXPECT_EQ(first.stats.prefilled_tokens, n);
  EXPECT_EQ(again.stats.reused_tokens, n - 1);  // the live sequence: all but the last prompt token
  EXPECT_EQ(again.stats.prefilled_tokens, 1);
  EXPECT_FALSE(first_text.empty());  // so that the comparisons below say something
  EXPECT_EQ(again_text, first_text);
  EXPECT_EQ(fresh_text, first_text);
  EXPECT_EQ(again.stats.output_tokens, first.stats.output_tokens);
}

// P, then P+X, then P again: the live sequence now shares only P with the next P+X, while the
// prefix cache still holds P+X from the second turn. The fourth turn reuses P+X (whole blocks),
// not just P, under a key and without one, and writes what a fresh prefill writes.
TEST(EngineTurn, ALiveSequenceNeverHidesALongerCachedPrefix) {
  const json short_chat = json::array({{{"role", "user"}, {"content", prose(120)}}});
  json long_chat = short_chat;
  long_chat.push_back({{"role", "assistant"}, {"content", "Noted."}});
  long_chat.push_back({{"role", "user"}, {"content", prose(200)}});
  const PreparedPrompt p = model().prepare(short_chat, nullptr, false);
  const PreparedPrompt px = model().prepare(long_chat, nullptr, false);
  ASSERT_TRUE(std::equal(p.ids.begin(), p.ids.end(), px.ids.begin()));  // P+X starts with P
  const ModelSpec& spec = model().weights().spec;
  const int64_t context = 2048;
  const auto budget = static_cast<int64_t>(kv::kv_bytes_per_token(spec, kv::KvPolicy(), context) * context) * 4;
  TurnOptions o;
  o.max_tokens = 4;
  for (const std::string affinity : {"agent-1", ""}) {
    SCOPED_TRACE("affinity '" + affinity + "'");
    SessionCache session(spec, budget, kv::KvPolicy(), true, context);
    auto turn = [&](SessionCache& cache, const PreparedPrompt& prompt, std::string* text = nullptr) {
      return run_turn(model(), cache, prompt, o, [&](TurnEvent&& e) { if (text) *text += e.text; }, affinity);
    };
    turn(session, p);
    const kv::KvPoolStats before = session.stats();
    turn(session, px);
    // The ordinary next turn continues the live sequence and never opens the pool: the look at
    // what the cache holds changes nothing (no open() counted).
    EXPECT_EQ(session.stats().prefix_hits + session.stats().prefix_misses, before.prefix_hits + before.prefix_misses);
    const TurnResult back = turn(session, p);
    EXPECT_EQ(back.stats.reused_tokens, static_cast<int64_t>(p.ids.size()) - 1);  // the live sequence
    std::string reused_text, fresh_text;
    const TurnResult again = turn(session, px, &reused_text);
    const auto whole_blocks = (static_cast<int64_t>(px.ids.size()) - 1) / kv::kKvBlockTokens * kv::kKvBlockTokens;
    EXPECT_EQ(again.stats.reused_tokens, whole_blocks) << "P is " << p.ids.size() << " tokens, P+X " << px.ids.size();
    SessionCache fresh(spec, budget, kv::KvPolicy(), true, context);
    turn(fresh, px, &fresh_text);
    EXPECT_FALSE(fresh_text.empty());
    EXPECT_EQ(reused_text, fresh_text);
  }
}

// A live sequence that fills the pool is continued part-way into a cached block: the trim's
// private copy of that block finds no room while the sequence still holds its tail. The turn
// opens from the prefix cache instead (before, it failed with "KV pool exhausted"), and answers
// what a fresh session answers.
TEST(EngineTurn, ALiveSequenceThatFillsThePoolIsContinuedInsideABlock) {
  PreparedPrompt p = model().prepare(json::array({{{"role", "user"}, {"content", prose(80)}}}), nullptr, false);
  const size_t n = 3 * kv::kKvBlockTokens;  // whole blocks, so the next turn's trim (to n - 1) ends inside one
  ASSERT_GT(p.ids.size(), n);
  p.ids.resize(n);
  p.roles.resize(n);
  const ModelSpec& spec = model().weights().spec;
  const int64_t context = 4 * kv::kKvBlockTokens;
  // Exactly the prompt's three blocks: after the first turn the live sequence holds all of it.
  const auto budget = static_cast<int64_t>(kv::kv_bytes_per_token(spec, kv::KvPolicy(), context) * static_cast<double>(n));
  TurnOptions o;
  o.max_tokens = 1;  // the sampled token is not run: the sequence stays at n tokens
  auto turn = [&](SessionCache& cache, std::string& text) {
    return run_turn(model(), cache, p, o, [&](TurnEvent&& e) { text += e.text; });
  };
  SessionCache session(spec, budget, kv::KvPolicy(), true, context);
  std::string first, again, fresh_text;
  turn(session, first);
  ASSERT_EQ(session.live_tokens(), static_cast<int64_t>(n));
  TurnResult r;
  ASSERT_NO_THROW(r = turn(session, again));
  EXPECT_EQ(r.stats.reused_tokens, static_cast<int64_t>(n) - kv::kKvBlockTokens);  // the cache's whole blocks
  SessionCache fresh(spec, budget, kv::KvPolicy(), true, context);
  turn(fresh, fresh_text);
  EXPECT_FALSE(fresh_text.empty());
  EXPECT_EQ(again, fresh_text);
  EXPECT_EQ(first, fresh_text);
}

json bash_and_read_tools() {
  json tools = bash_tool();
  tools.push_back(json::parse(R"({"type":"function","function":{"name":"Read","description":"Read a file",
    "parameters":{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}}})"));
  return tools;
}

// A model that answers in prose unless a call has been opened for it, and then writes `call`.
Script prose_unless_opened(const std::string& call) {
  return [call](const std::string& so_far) {
    return so_far.starts_with("<tool_call>") ? rest_of(call, so_far) : rest_of("I would run ls.", so_far);
  };
}

TEST(EngineTurn, ARequiredCallIsOpenedForTheModel) {
  TurnOptions o;
  o.max_tokens = 80;
  o.logits_processor = scripted(prose_unless_opened(kWholeCall));
  const Turn automatic = run(o, bash_tool());
  EXPECT_EQ(automatic.text, "I would run ls.");
  EXPECT_TRUE(automatic.calls.empty());

  o.tool_use = ToolUse::Required;
  const Turn required = run(o, bash_tool());
  ASSERT_EQ(required.calls.size(), 1u) << required.text;
  EXPECT_EQ(required.calls[0], R"(Bash {"command":"ls"})");
  EXPECT_EQ(required.text, "");
  EXPECT_EQ(required.result.finish, TurnFinish::ToolUse);
}

TEST(EngineTurn, ANamedToolIsWrittenForTheModelUpToItsArguments) {
  // The model would call Bash; the request names Read, and keel writes the call's start.
  const std::string read_call = "<tool_call>\n{\"name\": \"Read\", \"arguments\": {\"file_path\": \"/etc/hosts\"}}\n</tool_call>";
  TurnOptions o;
  o.max_tokens = 80;
  o.tool_use = ToolUse::Named;
  o.tool_name = "Read";
  o.logits_processor = scripted([&](const std::string& so_far) {
    return so_far.starts_with("<tool_call>\n{\"name\": \"Read\"") ? rest_of(read_call, so_far) : rest_of(kWholeCall, so_far);
  });
  const Turn t = run(o, bash_and_read_tools());
  ASSERT_EQ(t.calls.size(), 1u) << t.text;
  EXPECT_EQ(t.calls[0], R"(Read {"file_path":"/etc/hosts"})");
  EXPECT_EQ(t.result.stats.retries, 0);
}

TEST(EngineTurn, ARequiredCallIsOpenedAfterTheReasoningAndAgainOnARetry) {
  // The prompt opened the reasoning; the model reasons, then would answer in prose; once opened,
  // the first call lacks its argument and the retry (rewound to where keel opened the call)
  // writes it whole.
  const std::string bad_call = "<tool_call>\n{\"name\": \"Bash\", \"arguments\": {}}\n</tool_call>";
  int calls_begun = 0;
  TurnOptions o;
  o.max_tokens = 200;
  o.reasoning = true;
  o.tool_use = ToolUse::Required;
  o.logits_processor = scripted([&](const std::string& so_far) -> std::string {
    const std::string thought = "x\n</think>\n\n";
    if (!so_far.starts_with(thought)) return rest_of(thought, so_far);
    const std::string answer = so_far.substr(thought.size());
    if (!answer.starts_with("<tool_call>")) return rest_of("I would run ls.", answer);
    if (answer == "<tool_call>\n") ++calls_begun;
    return rest_of(calls_begun == 1 ? bad_call : kWholeCall, answer);
  });
  const Turn t = run(o, bash_tool(), true);
  EXPECT_EQ(t.reasoning, "x");
  EXPECT_EQ(t.result.stats.retries, 1);
  ASSERT_EQ(t.calls.size(), 1u) << t.text;
  EXPECT_EQ(t.calls[0], R"(Bash {"command":"ls"})");
  EXPECT_EQ(t.text, "");
}

TEST(EngineTurn, ACancelledTurnStopsBeforeItsFirstChunk) {
  std::atomic<bool> cancelled{true};
  TurnOptions o;
  o.cancelled = &cancelled;
  const Turn t = run(o);
  EXPECT_EQ(t.result.finish, TurnFinish::Cancelled);
  EXPECT_EQ(t.result.stats.prefilled_tokens, 0);
  EXPECT_EQ(t.result.stats.output_tokens, 0);
  EXPECT_TRUE(t.text.empty());
}

}  // namespace
}  // namespace keel::test
