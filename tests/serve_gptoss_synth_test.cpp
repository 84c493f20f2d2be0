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
#include <fstream>
#include <map>
#include <string>

#include "keel/arch/synth.h"
#include "server_support.h"
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
  const fs::path config_in = dir.path() / "config.json";
  std::ofstream(config_in) << config.dump(2);
  synthesize_model(config_in, out, SynthOptions{});

  fs::copy_file(dir.path() / "tokenizer.json", out / "tokenizer.json");
  // As gpt-oss ships them: the template in tokenizer_config.json (keel's fallback after
  // chat_template.jinja and chat_template.json), and the turn enders as end of sequence.
  const json tokenizer_config = {
      {"bos_token", "<|startoftext|>"}, {"eos_token", "<|return|>"}, {"pad_token", "<|endoftext|>"},
      {"clean_up_tokenization_spaces", false}, {"tokenizer_class", "PreTrainedTokenizerFast"},
      {"chat_template", read_text(shared_dir() / "fixtures/chat_templates/openai-gpt-oss-120b.jinja")}};
  std::ofstream(out / "tokenizer_config.json") << tokenizer_config.dump(2);
  const json generation_config = {
      {"bos_token_id", ids.at("<|startoftext|>")},
      {"eos_token_id", json::array({ids.at("<|return|>"), ids.at("<|call|>"), ids.at("<|endoftext|>")})},
      {"pad_token_id", ids.at("<|endoftext|>")}};
  std::ofstream(out / "generation_config.json") << generation_config.dump(2);
  return out;
}

// One server per test process (ctest runs each test in its own).
ServerProcess& server() {
  static TempDir dir;
  static ServerProcess s({"--model", synth_gptoss(dir).string()});
  return s;
}

const json& weather_schema() {
  static const json schema = json::parse(R"({"type": "object",
      "properties": {"city": {"type": "string", "description": "City name"},
                     "days": {"type": "integer", "description": "How many days ahead"}},
      "required": ["city"]})");
  return schema;
}

json anthropic_request() {
  return {{"model", kModel},
          {"max_tokens", kMaxTokens},
          {"temperature", 0},
          {"system", "You are a concise assistant."},
          {"tools", json::array({{{"name", "get_weather"},
                                  {"description", "Get the weather forecast for a city."},
                                  {"input_schema", weather_schema()}}})},
          {"messages", json::array({{{"role", "user"}, {"content", "What is the weather in Paris tomorrow?"}}})}};
}

json openai_request() {
  return {{"model", kModel},
          {"max_tokens", kMaxTokens},
          {"temperature", 0},
          {"tools", json::array({{{"type", "function"},
                                  {"function", {{"name", "get_weather"},
                                                {"description", "Get the weather forecast for a city."},
                                                {"parameters", weather_schema()}}}}})},
          {"messages", json::array({{{"role", "system"}, {"content", "You are a concise assistant."}},
                                    {{"role", "user"}, {"content", "What is the weather in Paris tomorrow?"}}})}};
}

// Empty when `args` fits weather_schema(), else why not.
std::string schema_error(const json& args) {
  if (!args.is_object()) return "arguments are not an object: " + args.dump();
  const json& schema = weather_schema();
  for (const auto& name : schema["required"])
    if (!args.contains(name.get<std::string>())) return "missing required " + name.get<std::string>() + ": " + args.dump();
  for (const auto& [name, value] : args.items()) {
    if (!schema["properties"].contains(name)) continue;  // additionalProperties is not false
    const std::string type = schema["properties"][name]["type"];
    if ((type == "string" && !value.is_string()) || (type == "integer" && !value.is_number_integer()))
      return "property " + name + " is not " + type + ": " + args.dump();
  }
  return "";
}

// Tokens generated: at least one (the model's end of turn counts), at most max_tokens plus the
// tokens of one regenerated invalid call (retries count), and all of max_tokens when it stopped there.
void expect_output_tokens(int64_t output, bool hit_max_tokens) {
  EXPECT_GE(output, 1);
  EXPECT_LE(output, 2 * kMaxTokens);
  if (hit_max_tokens) {
    EXPECT_GE(output, kMaxTokens);
  }
}

int64_t count_tokens(httplib::Client& client, const json& request) {
  json counted = request;
  counted.erase("stream");  // thinking stays: its budget sets gpt-oss's Reasoning: line
  const JsonResponse r = post_json(client, "/v1/messages/count_tokens", counted);
  EXPECT_EQ(r.status, 200) << r.text;
  return r.body.value("input_tokens", int64_t{-1});
}

// An Anthropic message, whole or rebuilt from its stream. `prompt_tokens` is what count_tokens
// said for the request.
void check_anthropic_message(const json& m, int64_t prompt_tokens) {
  SCOPED_TRACE(m.dump());
  EXPECT_EQ(m.value("type", ""), "message");
  EXPECT_EQ(m.value("role", ""), "assistant");
  EXPECT_EQ(m.value("model", ""), kModel);
  ASSERT_TRUE(m.contains("id") && m["id"].is_string());
  EXPECT_EQ(m["id"].get<std::string>().rfind("msg_", 0), 0u);
  ASSERT_TRUE(m.contains("content") && m["content"].is_array());
  bool has_call = false;
  for (const json& block : m["content"]) {
    const std::string type = block.value("type", "");
    if (type == "text") {
      EXPECT_TRUE(block.contains("text") && block["text"].is_string());
    } else if (type == "thinking") {
      EXPECT_TRUE(block.contains("thinking") && block["thinking"].is_string());
      EXPECT_TRUE(block.contains("signature") && block["signature"].is_string());
    } else if (type == "tool_use") {
      has_call = true;
      ASSERT_TRUE(block.contains("id") && block["id"].is_string());
      EXPECT_EQ(block["id"].get<std::string>().rfind("toolu_", 0), 0u);
      EXPECT_EQ(block.value("name", ""), "get_weather");
      EXPECT_EQ(schema_error(block.value("input", json())), "");
    } else {
      ADD_FAILURE() << "unexpected content block type " << block.dump();
    }
  }
  ASSERT_TRUE(m.contains("stop_reason") && m["stop_reason"].is_string());
  const std::string stop = m["stop_reason"];
  EXPECT_TRUE(stop == "end_turn" || stop == "max_tokens" || stop == "tool_use") << stop;
  if (stop == "tool_use") {
    EXPECT_TRUE(has_call);
  }
  EXPECT_TRUE(m.value("stop_sequence", json()).is_null());
  const json& usage = m.at("usage");
  for (const char* f : {"input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"}) {
    ASSERT_TRUE(usage.contains(f) && usage[f].is_number_integer()) << f;
    EXPECT_GE(usage[f].get<int64_t>(), 0) << f;
  }
  EXPECT_EQ(usage["input_tokens"].get<int64_t>() + usage["cache_read_input_tokens"].get<int64_t>(), prompt_tokens);
  expect_output_tokens(usage["output_tokens"], stop == "max_tokens");
}

// What a response's content means, whichever way it came: blocks without ids and signatures.
json anthropic_gist(const json& content) {
  json out = json::array();
  for (json block : content) {
    block.erase("id");
    block.erase("signature");
    out.push_back(block);
  }
  return out;
}

void check_openai_usage(const json& usage, bool hit_length) {
  SCOPED_TRACE(usage.dump());
  for (const char* f : {"prompt_tokens", "completion_tokens", "total_tokens"})
    ASSERT_TRUE(usage.contains(f) && usage[f].is_number_integer()) << f;
  const int64_t prompt = usage["prompt_tokens"], completion = usage["completion_tokens"];
  EXPECT_GT(prompt, 0);
  EXPECT_EQ(usage["total_tokens"].get<int64_t>(), prompt + completion);
  const int64_t cached = usage.at("prompt_tokens_details").at("cached_tokens");
  EXPECT_GE(cached, 0);
  EXPECT_LE(cached, prompt);
  expect_output_tokens(completion, hit_length);
}

void check_finish_reason(const json& finish, size_t calls) {
  ASSERT_TRUE(finish.is_string()) << finish.dump();
  const std::string f = finish;
  EXPECT_TRUE(f == "stop" || f == "length" || f == "tool_calls") << f;
  if (f == "tool_calls") {
    EXPECT_GT(calls, 0u);
  }
}

void check_openai_call(const std::string& id, const std::string& name, const json& arguments) {
  EXPECT_FALSE(id.empty());
  EXPECT_EQ(name, "get_weather");
  ASSERT_TRUE(arguments.is_string()) << arguments.dump();
  const json args = json::parse(arguments.get<std::string>(), nullptr, false);
  EXPECT_FALSE(args.is_discarded()) << arguments;
  EXPECT_EQ(schema_error(args), "");
}

void check_openai_completion(const json& body) {
  SCOPED_TRACE(body.dump());
  EXPECT_EQ(body.value("object", ""), "chat.completion");
  ASSERT_TRUE(body.contains("id") && body["id"].is_string());
  EXPECT_EQ(body["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_TRUE(body.contains("created") && body["created"].is_number_integer());
  EXPECT_EQ(body.value("model", ""), kModel);
  ASSERT_TRUE(body.contains("choices") && body["choices"].is_array());
  ASSERT_EQ(body["choices"].size(), 1u);
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice.value("index", -1), 0);
  const json& message = choice.at("message");
  EXPECT_EQ(message.value("role", ""), "assistant");
  ASSERT_TRUE(message.contains("content"));
  EXPECT_TRUE(message["content"].is_string() || message["content"].is_null());
  if (message.contains("reasoning_content")) {
    EXPECT_TRUE(message["reasoning_content"].is_string());
  }
  size_t calls = 0;
  if (message.contains("tool_calls")) {
    ASSERT_TRUE(message["tool_calls"].is_array());
    for (const json& call : message["tool_calls"]) {
      ++calls;
      EXPECT_EQ(call.value("type", ""), "function");
      check_openai_call(call.value("id", ""), call.at("function").value("name", ""), call.at("function").value("arguments", json()));
    }
  }
  check_finish_reason(choice.at("finish_reason"), calls);
  check_openai_usage(body.at("usage"), choice["finish_reason"] == "length");
}

// The next request: `request` with the answer replayed, then the results of its calls, or a
// further question when it made none.
json anthropic_next_turn(json request, const json& answer) {
  json& messages = request["messages"];
  if (!answer["content"].empty()) messages.push_back({{"role", "assistant"}, {"content", answer["content"]}});
  json results = json::array();
  for (const json& block : answer["content"])
    if (block["type"] == "tool_use")
      results.push_back({{"type", "tool_result"}, {"tool_use_id", block["id"]}, {"content", "18 C, light rain"}});
  if (results.empty()) results.push_back({{"type", "text"}, {"text", "And in Rome?"}});
  messages.push_back({{"role", "user"}, {"content", results}});
  return request;
}

json openai_next_turn(json request, const json& message) {
  json& messages = request["messages"];
  json replay = {{"role", "assistant"}, {"content", message["content"]}};
  if (message.contains("reasoning_content")) replay["reasoning_content"] = message["reasoning_content"];
  if (message.contains("tool_calls")) replay["tool_calls"] = message["tool_calls"];
  messages.push_back(replay);
  if (message.contains("tool_calls"))
    for (const json& call : message["tool_calls"])
      messages.push_back({{"role", "tool"}, {"tool_call_id", call["id"]}, {"content", "18 C, light rain"}});
  else
    messages.push_back({{"role", "user"}, {"content", "And in Rome?"}});
  return request;
}

// Streams `request` (its "stream" set here) and rebuilds the answer with the strict grammar
// checker of its protocol; null, with a failure recorded, when the answer is not a 200 event
// stream that follows the grammar.
json stream(httplib::Client& client, const std::string& path, json request) {
  request["stream"] = true;
  auto res = client.Post(path, request.dump(), "application/json");
  if (!res) {
    ADD_FAILURE() << path << ": no response";
    return nullptr;
  }
  if (res->status != 200) {
    ADD_FAILURE() << path << ": status " << res->status << "\n" << res->body << "\n" << server().log();
    return nullptr;
  }
  EXPECT_EQ(res->get_header_value("Content-Type").rfind("text/event-stream", 0), 0u);
  try {
    return path == "/v1/messages" ? replay_anthropic_stream(parse_sse(res->body)) : replay_openai_stream(parse_sse(res->body));
  } catch (const std::exception& e) {
    ADD_FAILURE() << path << ": " << e.what() << "\n" << res->body;
    return nullptr;
  }
}

// An OpenAI answer rebuilt from its stream (replay_openai_stream's shape).
void check_openai_stream(const json& streamed) {
  SCOPED_TRACE(streamed.dump());
  EXPECT_TRUE(streamed["content"].is_string());
  EXPECT_TRUE(streamed["reasoning_content"].is_string());
  for (const json& call : streamed["tool_calls"]) check_openai_call(call["id"], call["name"], call["arguments"]);
  check_finish_reason(streamed["finish_reason"], streamed["tool_calls"].size());
  ASSERT_TRUE(streamed["usage"].is_object()) << "stream_options.include_usage was set";
  check_openai_usage(streamed["usage"], streamed["finish_reason"] == "length");
}

TEST(ServeGptOssSynth, HealthAndModelsNameTheHarmonyModel) {
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
  json no_tools = anthropic_request();
  no_tools.erase("tools");
  EXPECT_GT(count_tokens(client, anthropic_request()), count_tokens(client, no_tools) + 10);
}

TEST(ServeGptOssSynth, AnthropicMessagesWholeStreamedAndReplayed) {
  auto client = server().client();
  const json plain = anthropic_request();
  const JsonResponse first = post_json(client, "/v1/messages", plain);
  ASSERT_EQ(first.status, 200) << first.text << server().log();
  check_anthropic_message(first.body, count_tokens(client, plain));

  // With thinking: the same turn whole and streamed must describe the same message.
  json thinking = plain;
  thinking["thinking"] = {{"type", "enabled"}, {"budget_tokens", 16}};
  const JsonResponse whole = post_json(client, "/v1/messages", thinking);
  ASSERT_EQ(whole.status, 200) << whole.text << server().log();
  check_anthropic_message(whole.body, count_tokens(client, thinking));
  const json streamed = stream(client, "/v1/messages", thinking);
  ASSERT_FALSE(streamed.is_null());
  check_anthropic_message(streamed, count_tokens(client, thinking));
  EXPECT_EQ(anthropic_gist(streamed["content"]), anthropic_gist(whole.body["content"]));
  EXPECT_EQ(streamed["stop_reason"], whole.body["stop_reason"]);
  EXPECT_EQ(streamed["usage"]["output_tokens"], whole.body["usage"]["output_tokens"]);

  // The second turn replays the first answer (thinking, text and calls as the model wrote them).
  const json second_request = anthropic_next_turn(thinking, whole.body);
  const JsonResponse second = post_json(client, "/v1/messages", second_request);
  ASSERT_EQ(second.status, 200) << second.text << server().log();
  check_anthropic_message(second.body, count_tokens(client, second_request));

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
  json without_reasoning = history;
  without_reasoning["messages"][1]["content"].erase(0);
  const int64_t history_tokens = count_tokens(client, history);
  EXPECT_GT(history_tokens, count_tokens(client, without_reasoning));
  const json third = stream(client, "/v1/messages", history);
  ASSERT_FALSE(third.is_null());
  check_anthropic_message(third, history_tokens);
}

TEST(ServeGptOssSynth, OpenAIChatWholeStreamedAndReplayed) {
  auto client = server().client();
  const JsonResponse first = post_json(client, "/v1/chat/completions", openai_request());
  ASSERT_EQ(first.status, 200) << first.text << server().log();
  check_openai_completion(first.body);

  // With a reasoning effort: the same turn whole and streamed must describe the same message.
  json reasoning = openai_request();
  reasoning["reasoning_effort"] = "low";
  const JsonResponse whole = post_json(client, "/v1/chat/completions", reasoning);
  ASSERT_EQ(whole.status, 200) << whole.text << server().log();
  check_openai_completion(whole.body);
  json streamed_request = reasoning;
  streamed_request["stream_options"] = {{"include_usage", true}};
  const json streamed = stream(client, "/v1/chat/completions", streamed_request);
  ASSERT_FALSE(streamed.is_null());
  check_openai_stream(streamed);
  const json& message = whole.body["choices"][0]["message"];
  EXPECT_EQ(streamed["content"], message["content"].is_null() ? json("") : message["content"]);
  EXPECT_EQ(streamed["reasoning_content"], message.value("reasoning_content", json("")));
  EXPECT_EQ(streamed["tool_calls"].size(), message.value("tool_calls", json::array()).size());
  EXPECT_EQ(streamed["finish_reason"], whole.body["choices"][0]["finish_reason"]);
  EXPECT_EQ(streamed["usage"]["prompt_tokens"], whole.body["usage"]["prompt_tokens"]);
  EXPECT_EQ(streamed["usage"]["completion_tokens"], whole.body["usage"]["completion_tokens"]);

  // The second turn replays the first answer (reasoning, content and calls as the model wrote them).
  const JsonResponse second = post_json(client, "/v1/chat/completions", openai_next_turn(reasoning, message));
  ASSERT_EQ(second.status, 200) << second.text << server().log();
  check_openai_completion(second.body);

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
  check_openai_completion(third.body);
  json without_reasoning = history;
  without_reasoning["messages"][2].erase("reasoning_content");
  const JsonResponse fourth = post_json(client, "/v1/chat/completions", without_reasoning);
  ASSERT_EQ(fourth.status, 200) << fourth.text << server().log();
  check_openai_completion(fourth.body);
  EXPECT_GT(third.body["usage"]["prompt_tokens"].get<int64_t>(), fourth.body["usage"]["prompt_tokens"].get<int64_t>());
}

// Greedy decoding of this random model repeats one plain token. Sampled, it writes Harmony's
// control tokens here and there (some turns end on <|return|> or <|call|>, others open headers
// that never close), in no order a real model would: whatever comes out, every answer must still
// be a well-formed stream. The OpenAI requests are seeded, so a failure reproduces; Anthropic's
// API has no seed, so a failure there prints the whole stream.
TEST(ServeGptOssSynth, SampledNoiseStreamsFollowTheGrammar) {
  auto client = server().client();
  for (int seed = 0; seed < 16; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    json a = anthropic_request();
    a["temperature"] = 1.0;
    if (seed % 2 == 0) a["thinking"] = {{"type", "enabled"}, {"budget_tokens", 16}};
    const json message = stream(client, "/v1/messages", a);
    if (!message.is_null()) check_anthropic_message(message, count_tokens(client, a));

    json o = openai_request();
    o["temperature"] = 1.0;
    o["seed"] = seed;
    o["stream_options"] = {{"include_usage", true}};
    if (seed % 2 == 1) o["reasoning_effort"] = "high";
    const json chunks = stream(client, "/v1/chat/completions", o);
    if (!chunks.is_null()) check_openai_stream(chunks);
  }
}

}  // namespace
}  // namespace keel::test
