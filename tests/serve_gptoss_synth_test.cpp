// A served `keel synth` of a tiny gpt-oss shape (issue #13): random weights, a BPE tokenizer
// carrying gpt-oss's Harmony control tokens, and gpt-oss's real chat template. Its answers are
// noise; the tests check the protocol of every answer: HTTP 200, well-formed bodies, strict SSE
// event grammar, legal stop/finish reasons, consistent usage, tool calls whose arguments fit the
// tool's schema, and a second turn that replays the first answer (reasoning and calls included)
// through the template's history path.
//
// The fixtures have no gpt-oss tokenizer.json (200k tokens); tiny-toolcaller's Qwen2.5 BPE stands
// in for it, with its added tokens rewritten into the Harmony markers: its five added tokens are
// renamed in place where a Harmony marker is missing (<|endoftext|> is already there and keeps
// its id), and the remaining markers are appended after them, so the vocabulary stays contiguous
// (1656 BPE tokens + 9 specials) and the synthesized embedding has a row for every id.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "server_support.h"
#include "synth_folder_support.h"
#include "tokenizer_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

constexpr const char* kModel = "gpt-oss-synth";
constexpr int kMaxTokens = 24;

// The model folder, written once per test process under `dir`.
fs::path synth_gptoss(const TempDir& dir) {
  const fs::path out = dir.path() / kModel;
  const std::map<std::string, int32_t> ids = write_tokenizer_with_specials(
      tiny_toolcaller_dir() / "tokenizer.json", dir.path() / "tokenizer.json",
      {{"<|im_start|>", "<|start|>"}, {"<|im_end|>", "<|end|>"}, {"<tool_call>", "<|message|>"}, {"</tool_call>", "<|channel|>"}},
      {"<|startoftext|>", "<|constrain|>", "<|return|>", "<|call|>"});
  int32_t vocab = 0;
  for (const auto& [text, id] : ids) vocab = std::max(vocab, id + 1);
  for (const char* marker : {"<|startoftext|>", "<|endoftext|>", "<|start|>", "<|end|>", "<|message|>", "<|channel|>",
                             "<|constrain|>", "<|return|>", "<|call|>"})
    if (!ids.count(marker)) throw std::runtime_error(std::string("tokenizer rewrite lost ") + marker);

  json config = json::parse(read_text(shared_dir() / "models/tiny-gptoss-random/config.json"));
  config["vocab_size"] = vocab;
  config["bos_token_id"] = ids.at("<|startoftext|>");
  config["eos_token_id"] = ids.at("<|return|>");
  config["pad_token_id"] = ids.at("<|endoftext|>");
  // As gpt-oss ships them: the template in tokenizer_config.json (keel's fallback after
  // chat_template.jinja and chat_template.json), and the turn enders as end of sequence.
  const json tokenizer_config = {
      {"bos_token", "<|startoftext|>"}, {"eos_token", "<|return|>"}, {"pad_token", "<|endoftext|>"},
      {"clean_up_tokenization_spaces", false}, {"tokenizer_class", "PreTrainedTokenizerFast"},
      {"chat_template", read_text(shared_dir() / "fixtures/chat_templates/openai-gpt-oss-120b.jinja")}};
  const json generation_config = {
      {"bos_token_id", ids.at("<|startoftext|>")},
      {"eos_token_id", json::array({ids.at("<|return|>"), ids.at("<|call|>"), ids.at("<|endoftext|>")})},
      {"pad_token_id", ids.at("<|endoftext|>")}};
  return write_synth_folder(dir.path(), out, config, dir.path() / "tokenizer.json", tokenizer_config, generation_config);
}

// One server per test process (ctest runs each test in its own).
ServerProcess& server() {
  static TempDir dir;
  static ServerProcess s({"--model", synth_gptoss(dir).string()});
  return s;
}

// The protocol checks, for this server and its requests.
const NoiseChecks& checks() {
  static const NoiseChecks c(server(), kModel, kMaxTokens);
  return c;
}

TEST(ServeGptOssSynth, HealthAndModelsNameTheHarmonyModel) {
  const NoiseChecks& noise = checks();
  auto client = server().client();
  auto health = client.Get("/health");
  ASSERT_TRUE(health);
  ASSERT_EQ(health->status, 200) << health->body;
  const json h = json::parse(health->body);
  EXPECT_EQ(h["status"], "ok");
  EXPECT_EQ(h["model"], kModel);
  EXPECT_EQ(h["tool_call_format"], "harmony");
  auto models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  ASSERT_EQ(models->status, 200) << models->body;
  const json list = json::parse(models->body);
  ASSERT_EQ(list["data"].size(), 1u);
  EXPECT_EQ(list["data"][0]["id"], kModel);
  // The prompt is gpt-oss's rendering: a tool adds the developer message's TypeScript namespace.
  json no_tools = noise.anthropic_request();
  no_tools.erase("tools");
  EXPECT_GT(noise.count_tokens(client, noise.anthropic_request()), noise.count_tokens(client, no_tools) + 10);
}

TEST(ServeGptOssSynth, AnthropicMessagesWholeStreamedAndReplayed) {
  const NoiseChecks& noise = checks();
  auto client = server().client();
  const json plain = noise.anthropic_request();
  const JsonResponse first = post_json(client, "/v1/messages", plain);
  ASSERT_EQ(first.status, 200) << first.text << server().log();
  noise.check_anthropic_message(first.body, noise.count_tokens(client, plain));

  // With thinking: the same turn whole and streamed must describe the same message.
  json thinking = plain;
  thinking["thinking"] = {{"type", "enabled"}, {"budget_tokens", 16}};
  const JsonResponse whole = post_json(client, "/v1/messages", thinking);
  ASSERT_EQ(whole.status, 200) << whole.text << server().log();
  noise.check_anthropic_message(whole.body, noise.count_tokens(client, thinking));
  const json streamed = noise.stream(client, "/v1/messages", thinking);
  ASSERT_FALSE(streamed.is_null());
  noise.check_anthropic_message(streamed, noise.count_tokens(client, thinking));
  EXPECT_EQ(anthropic_gist(streamed["content"]), anthropic_gist(whole.body["content"]));
  EXPECT_EQ(streamed["stop_reason"], whole.body["stop_reason"]);
  EXPECT_EQ(streamed["usage"]["output_tokens"], whole.body["usage"]["output_tokens"]);

  // The second turn replays the first answer (thinking, text and calls as the model wrote them).
  const json second_request = anthropic_next_turn(thinking, whole.body);
  const JsonResponse second = post_json(client, "/v1/messages", second_request);
  ASSERT_EQ(second.status, 200) << second.text << server().log();
  noise.check_anthropic_message(second.body, noise.count_tokens(client, second_request));

  // Whatever the noise held, a history with reasoning before a call and the call's result runs
  // the template's analysis-before-call path (the reasoning is rendered: the prompt is longer
  // than without it); streamed this time.
  json history = thinking;
  history["messages"].push_back(
      {{"role", "assistant"},
       {"content", json::array({{{"type", "thinking"}, {"thinking", "The user wants the forecast; ask the tool."}, {"signature", ""}},
                                {{"type", "tool_use"}, {"id", "toolu_01"}, {"name", "get_weather"},
                                 {"input", {{"city", "Paris"}, {"days", 1}}}}})}});
  history["messages"].push_back(
      {{"role", "user"},
       {"content", json::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_01"}, {"content", "18 C, light rain"}}})}});
  noise.check_reasoning_history(client, history);
}

TEST(ServeGptOssSynth, OpenAIChatWholeStreamedAndReplayed) {
  const NoiseChecks& noise = checks();
  auto client = server().client();
  const JsonResponse first = post_json(client, "/v1/chat/completions", noise.openai_request());
  ASSERT_EQ(first.status, 200) << first.text << server().log();
  noise.check_openai_completion(first.body);

  // With a reasoning effort: the same turn whole and streamed must describe the same message.
  json reasoning = noise.openai_request();
  reasoning["reasoning_effort"] = "low";
  const JsonResponse whole = noise.openai_whole_and_streamed(client, reasoning);
  ASSERT_EQ(whole.status, 200) << whole.text << server().log();

  // The second turn replays the first answer (reasoning, content and calls as the model wrote them).
  const JsonResponse second = post_json(client, "/v1/chat/completions", openai_next_turn(reasoning, whole.body["choices"][0]["message"]));
  ASSERT_EQ(second.status, 200) << second.text << server().log();
  noise.check_openai_completion(second.body);

  // Whatever the noise held: reasoning before a call and its result, the analysis-before-call
  // path (the reasoning is rendered: the prompt is longer than without it).
  json history = reasoning;
  history["messages"].push_back(
      {{"role", "assistant"},
       {"content", nullptr},
       {"reasoning_content", "The user wants the forecast; ask the tool."},
       {"tool_calls", json::array({{{"id", "call_01"}, {"type", "function"},
                                    {"function", {{"name", "get_weather"}, {"arguments", R"({"city":"Paris","days":1})"}}}}})}});
  history["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_01"}, {"content", "18 C, light rain"}});
  const JsonResponse third = post_json(client, "/v1/chat/completions", history);
  ASSERT_EQ(third.status, 200) << third.text << server().log();
  noise.check_openai_completion(third.body);
  json without_reasoning = history;
  without_reasoning["messages"][2].erase("reasoning_content");
  const JsonResponse fourth = post_json(client, "/v1/chat/completions", without_reasoning);
  ASSERT_EQ(fourth.status, 200) << fourth.text << server().log();
  noise.check_openai_completion(fourth.body);
  EXPECT_GT(third.body["usage"]["prompt_tokens"].get<int64_t>(), fourth.body["usage"]["prompt_tokens"].get<int64_t>());
}

// Greedy decoding of this random model repeats one plain token. Sampled, it writes Harmony's
// control tokens here and there (some turns end on <|return|> or <|call|>, others open headers
// that never close), in no order a real model would: whatever comes out, every answer must still
// be a well-formed stream. The OpenAI requests are seeded, so a failure reproduces; Anthropic's
// API has no seed, so a failure there prints the whole stream.
TEST(ServeGptOssSynth, SampledNoiseStreamsFollowTheGrammar) {
  const NoiseChecks& noise = checks();
  auto client = server().client();
  for (int seed = 0; seed < 16; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    json a = noise.anthropic_request();
    a["temperature"] = 1.0;
    if (seed % 2 == 0) a["thinking"] = {{"type", "enabled"}, {"budget_tokens", 16}};
    const json message = noise.stream(client, "/v1/messages", a);
    if (!message.is_null()) noise.check_anthropic_message(message, noise.count_tokens(client, a));

    json o = noise.openai_request();
    o["temperature"] = 1.0;
    o["seed"] = seed;
    o["stream_options"] = {{"include_usage", true}};
    if (seed % 2 == 1) o["reasoning_effort"] = "high";
    const json chunks = noise.stream(client, "/v1/chat/completions", o);
    if (!chunks.is_null()) noise.check_openai_stream(chunks);
  }
}

}  // namespace
}  // namespace keel::test
