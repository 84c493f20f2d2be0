// A served `keel synth` of a tiny Gemma 4 shape (issue #14): random weights, a BPE tokenizer
// carrying Gemma 4's control tokens, and Gemma 4's real chat template. Its answers are noise; the
// tests check the protocol of every answer through both APIs, whole and streamed, thinking off and
// on (NoiseChecks, server_support.h: HTTP 200, well-formed bodies, strict SSE event grammar, legal
// stop/finish reasons, consistent usage, tool calls whose arguments fit the tool's schema), and
// second turns that replay the first answer (reasoning and calls included) and a call's result
// through the template's history path.
//
// The fixtures have no Gemma 4 tokenizer.json (262k tokens); tiny-toolcaller's Qwen2.5 BPE stands
// in for it, with its added tokens rewritten into Gemma 4's markers: its five added tokens are
// renamed in place and the other markers appended after them, all special, so the vocabulary stays
// contiguous (1656 BPE tokens + 15 specials) and the synthesized embedding has a row for every id.
// As in Gemma 4, <|tool_call>, <tool_call|>, <|"|>, <|channel> and <channel|> are output syntax the
// parser consumes; <eos> and <turn|> end the turn as end of sequence, and any other control token
// (the <|tool_response> the model writes after its calls) ends it as a special token that is not
// output syntax (toolcall/output_syntax.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>

#include "keel/text/tokenizer.h"
#include "server_support.h"
#include "synth_folder_support.h"
#include "tokenizer_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

constexpr const char* kModel = "gemma4-synth";
constexpr int kMaxTokens = 24;

// The model folder, written once per test process under `dir`.
fs::path synth_gemma4(const TempDir& dir) {
  const fs::path out = dir.path() / kModel;
  const std::map<std::string, int32_t> ids = write_tokenizer_with_specials(
      tiny_toolcaller_dir() / "tokenizer.json", dir.path() / "tokenizer.json",
      {{"<|endoftext|>", "<pad>"}, {"<|im_start|>", "<|turn>"}, {"<|im_end|>", "<turn|>"},
       {"<tool_call>", "<|tool_call>"}, {"</tool_call>", "<tool_call|>"}},
      {"<eos>", "<bos>", "<|think|>", "<|tool>", "<tool|>", "<|\"|>", "<|tool_response>", "<tool_response|>",
       "<|channel>", "<channel|>"});
  int32_t vocab = 0;
  for (const auto& [text, id] : ids) vocab = std::max(vocab, id + 1);

  // Gemma 4 keeps the language model's ids in text_config, where keel's ConfigView looks first.
  json config = json::parse(read_text(shared_dir() / "models/tiny-gemma4-random/config.json"));
  json& text = config.at("text_config");
  text["vocab_size"] = vocab;
  text["vocab_size_per_layer_input"] = vocab;
  text["bos_token_id"] = ids.at("<bos>");
  text["eos_token_id"] = ids.at("<eos>");
  text["pad_token_id"] = ids.at("<pad>");
  // As Gemma 4 ships it, the template in chat_template.jinja (the first place keel looks); the
  // template writes bos_token itself. <turn|> closes every turn the template renders, so it ends
  // generation too.
  const json tokenizer_config = {{"bos_token", "<bos>"}, {"eos_token", "<eos>"}, {"pad_token", "<pad>"},
                                 {"clean_up_tokenization_spaces", false}, {"tokenizer_class", "GemmaTokenizer"}};
  const json generation_config = {{"bos_token_id", ids.at("<bos>")},
                                  {"eos_token_id", json::array({ids.at("<eos>"), ids.at("<turn|>")})},
                                  {"pad_token_id", ids.at("<pad>")}};
  write_synth_folder(dir.path(), out, config, dir.path() / "tokenizer.json", tokenizer_config, generation_config);
  std::ofstream(out / "chat_template.jinja") << read_text(shared_dir() / "fixtures/chat_templates/google-gemma-4-31B-it.jinja");
  return out;
}

const fs::path& model_dir() {
  static TempDir dir;
  static const fs::path out = synth_gemma4(dir);
  return out;
}

// One server per test process (ctest runs each test in its own).
ServerProcess& server() {
  static ServerProcess s({"--model", model_dir().string()});
  return s;
}

// The protocol checks, for this server and its requests.
const NoiseChecks& checks() {
  static const NoiseChecks c(server(), kModel, kMaxTokens);
  return c;
}

// An Anthropic history in which the model thought, called the tool and got its result: the model
// continues its own turn after the result (the template writes no generation prompt there).
json anthropic_call_history(json request) {
  request["messages"].push_back(
      {{"role", "assistant"},
       {"content", json::array({{{"type", "thinking"}, {"thinking", "The user wants the forecast; ask the tool."}, {"signature", ""}},
                                {{"type", "tool_use"}, {"id", "toolu_01"}, {"name", "get_weather"},
                                 {"input", {{"city", "Paris"}, {"days", 1}}}}})}});
  request["messages"].push_back(
      {{"role", "user"},
       {"content", json::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_01"}, {"content", "18 C, light rain"}}})}});
  return request;
}

TEST(ServeGemma4Synth, HealthAndModelsNameTheGemma4Model) {
  const NoiseChecks& noise = checks();
  auto client = server().client();
  auto health = client.Get("/health");
  ASSERT_TRUE(health);
  ASSERT_EQ(health->status, 200) << health->body;
  const json h = json::parse(health->body);
  EXPECT_EQ(h["status"], "ok");
  EXPECT_EQ(h["model"], kModel);
  EXPECT_EQ(h["tool_call_format"], "gemma4");
  auto models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  ASSERT_EQ(models->status, 200) << models->body;
  const json list = json::parse(models->body);
  ASSERT_EQ(list["data"].size(), 1u);
  EXPECT_EQ(list["data"][0]["id"], kModel);

  // The prompt is Gemma 4's rendering: a tool adds its <|tool>declaration:...<tool|> to the system turn.
  const json plain = noise.anthropic_request();
  json no_tools = plain;
  no_tools.erase("tools");
  EXPECT_GT(noise.count_tokens(client, plain), noise.count_tokens(client, no_tools) + 10);
  // The thinking switch reaches the template both ways: on, <|think|>\n opens the system turn; off,
  // the generation prompt ends with an empty thought, <|channel>thought\n<channel|>. The rest of
  // the two prompts is the same tokens (special tokens and newlines split the text around them).
  json thinking = plain;
  thinking["thinking"] = {{"type", "enabled"}, {"budget_tokens", 16}};
  const text::Tokenizer tok = text::Tokenizer::from_file(model_dir());
  const auto tokens = [&](const std::string& text) { return static_cast<int64_t>(tok.encode(text).size()); };
  EXPECT_EQ(noise.count_tokens(client, plain) - noise.count_tokens(client, thinking),
            tokens("<|channel>thought\n<channel|>") - tokens("<|think|>\n"));
}

TEST(ServeGemma4Synth, AnthropicMessagesWholeStreamedAndReplayed) {
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

  // The second turn replays each first answer (thinking, text and calls as the model wrote them).
  const auto replay = [&](const json& request, const json& answer) {
    const json next = anthropic_next_turn(request, answer);
    const JsonResponse second = post_json(client, "/v1/messages", next);
    ASSERT_EQ(second.status, 200) << second.text << server().log();
    noise.check_anthropic_message(second.body, noise.count_tokens(client, next));
  };
  replay(plain, first.body);
  replay(thinking, whole.body);

  // Whatever the noise held, a history with thinking before a call and the call's result runs the
  // template's thought-before-call path (the call follows the last user message, so its reasoning
  // is rendered: the prompt is longer than without it); streamed this time.
  const json history = anthropic_call_history(thinking);
  noise.check_reasoning_history(client, history);
}

TEST(ServeGemma4Synth, OpenAIChatWholeStreamedAndReplayed) {
  const NoiseChecks& noise = checks();
  auto client = server().client();
  const JsonResponse first = post_json(client, "/v1/chat/completions", noise.openai_request());
  ASSERT_EQ(first.status, 200) << first.text << server().log();
  noise.check_openai_completion(first.body);

  // With a reasoning effort (thinking on): the same turn whole and streamed must describe the
  // same message.
  json reasoning = noise.openai_request();
  reasoning["reasoning_effort"] = "low";
  const JsonResponse whole = noise.openai_whole_and_streamed(client, reasoning);
  ASSERT_EQ(whole.status, 200) << whole.text << server().log();

  // The second turn replays each first answer (reasoning, content and calls as the model wrote them).
  const JsonResponse second =
      post_json(client, "/v1/chat/completions", openai_next_turn(noise.openai_request(), first.body["choices"][0]["message"]));
  ASSERT_EQ(second.status, 200) << second.text << server().log();
  noise.check_openai_completion(second.body);
  const JsonResponse replayed = post_json(client, "/v1/chat/completions", openai_next_turn(reasoning, whole.body["choices"][0]["message"]));
  ASSERT_EQ(replayed.status, 200) << replayed.text << server().log();
  noise.check_openai_completion(replayed.body);

  // Whatever the noise held: reasoning before two calls and their results, which the template
  // finds by scanning forward from the calls (named through tool_call_id), and the
  // thought-before-call path (the reasoning is rendered: the prompt is longer than without it).
  json history = reasoning;
  history["messages"].push_back(
      {{"role", "assistant"},
       {"content", nullptr},
       {"reasoning_content", "The user wants the forecast; ask the tool."},
       {"tool_calls", json::array({{{"id", "call_01"}, {"type", "function"},
                                    {"function", {{"name", "get_weather"}, {"arguments", R"({"city":"Paris","days":1})"}}}},
                                   {{"id", "call_02"}, {"type", "function"},
                                    {"function", {{"name", "get_weather"}, {"arguments", R"({"city":"Rome"})"}}}}})}});
  history["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_01"}, {"content", "18 C, light rain"}});
  history["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_02"}, {"content", "24 C, sunny"}});
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

// Greedy decoding of this random model writes plain tokens. Sampled, it writes Gemma 4's control
// tokens here and there (some turns end on <turn|> or another control token, others open a thought
// or a call that never closes, or close one never opened), in no order a real model would: whatever
// comes out, every answer must still be a well-formed stream. Half the requests continue the
// model's turn after a call's result. The OpenAI requests are seeded, so a failure reproduces;
// Anthropic's API has no seed, so a failure there prints the whole stream.
TEST(ServeGemma4Synth, SampledNoiseStreamsFollowTheGrammar) {
  const NoiseChecks& noise = checks();
  auto client = server().client();
  for (int seed = 0; seed < 16; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    json a = noise.anthropic_request();
    a["temperature"] = 1.0;
    if (seed % 2 == 0) a["thinking"] = {{"type", "enabled"}, {"budget_tokens", 16}};
    if (seed >= 8) a = anthropic_call_history(a);
    const json message = noise.stream(client, "/v1/messages", a);
    if (!message.is_null()) noise.check_anthropic_message(message, noise.count_tokens(client, a));

    json o = noise.openai_request();
    o["temperature"] = 1.0;
    o["seed"] = seed;
    o["stream_options"] = {{"include_usage", true}};
    if (seed % 2 == 1) o["reasoning_effort"] = "high";
    if (seed >= 8) {
      o["messages"].push_back(
          {{"role", "assistant"},
           {"content", nullptr},
           {"tool_calls", json::array({{{"id", "call_01"}, {"type", "function"},
                                        {"function", {{"name", "get_weather"}, {"arguments", R"({"city":"Paris"})"}}}}})}});
      o["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_01"}, {"content", "18 C, light rain"}});
    }
    const json chunks = noise.stream(client, "/v1/chat/completions", o);
    if (!chunks.is_null()) noise.check_openai_stream(chunks);
  }
}

}  // namespace
}  // namespace keel::test
