// A served `keel synth` of the tiny Qwen3-Next shape (Gated DeltaNet and gated full attention
// layers, experts with a shared expert): the real Qwen3 tokenizer and the Qwen3-Coder chat
// template, whose calls are XML (<tool_call><function=NAME><parameter=P>V</parameter>...). The
// tests check the protocol through both APIs, whole and streamed: the format keel detects from the
// template, the prompt the template renders (token for token against a rendering written out here
// from the template: the tool definitions, a call in the history and its result), and calls parsed
// from the model's output.
//
// Random weights never write a call, so the model's output is scripted in its weights: every
// layer's output projections (attention, linear attention, FFN and experts) are zero, so the last
// hidden state is the current token's embedding, and the embeddings and lm_head make a chain in
// which each token of the call picks the next. The generation prompt ends with "\n", whose
// successor is <tool_call>; the call's last token, </tool_call>, picks <|im_end|>. A token picks
// exactly one successor, so the call is written with distinct tokens (no newlines, which the
// parser does not need: the template's canonical layout repeats "\n" and ">\n").
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "keel/text/tokenizer.h"
#include "server_support.h"
#include "synth_folder_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

constexpr const char* kModel = "qwen3next-synth";
constexpr int kMaxTokens = 48;

fs::path tokenizer_dir() { return shared_dir() / "fixtures/tokenizers/qwen3"; }
fs::path template_file() { return shared_dir() / "fixtures/chat_templates/Qwen3-Coder.jinja"; }

const text::Tokenizer& tokenizer() {
  static const text::Tokenizer tok = text::Tokenizer::from_file(tokenizer_dir() / "tokenizer.json");
  return tok;
}

int32_t id_of(const std::string& token) {
  const std::optional<int32_t> id = tokenizer().token_id(token);
  if (!id) throw std::runtime_error("the Qwen3 tokenizer has no token " + token);
  return *id;
}

int64_t token_count(const std::string& text) { return static_cast<int64_t>(tokenizer().encode(text).size()); }

// The call the model writes, token by token: each token once, so each has one successor.
const std::vector<std::string>& call_pieces() {
  static const std::vector<std::string> pieces = {"<tool_call>", "<f",    "unction", "=get",  "_weather", "><",
                                                  "parameter",   "=c",    "ity",     ">P",    "aris",     "</",
                                                  "param",       "eter",  "></",     "function", ">",     "</tool_call>"};
  return pieces;
}
constexpr const char* kCallText = "<tool_call><function=get_weather><parameter=city>Paris</parameter></function></tool_call>";
// The chain's tokens and the one after it: the call and <|im_end|>.
constexpr int64_t kCallOutputTokens = 19;

// The tensors of a safetensors file, edited in place through `edit(name, dtype, shape, bytes)`.
void edit_safetensors(const fs::path& file, const std::function<void(const std::string&, const std::string&,
                                                                      const std::vector<int64_t>&, uint8_t*)>& edit) {
  std::string bytes = read_text(file);
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = (len << 8) | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
  const json header = json::parse(bytes.substr(8, len));
  for (const auto& [name, t] : header.items()) {
    if (name == "__metadata__") continue;
    const size_t begin = 8 + len + t["data_offsets"][0].get<size_t>();
    edit(name, t["dtype"], t["shape"].get<std::vector<int64_t>>(), reinterpret_cast<uint8_t*>(bytes.data() + begin));
  }
  std::ofstream(file, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The scripted chain (file comment): the states are "\n" (the generation prompt's last token) and
// the call's tokens, state k's embedding is the k-th unit vector and its successor's lm_head row
// reads that coordinate; every other lm_head row is zero.
void script_the_call(const fs::path& weights) {
  std::vector<int32_t> chain = {id_of("Ċ")};  // "\n" in byte-level form
  std::string joined;
  for (const std::string& piece : call_pieces()) {
    chain.push_back(id_of(piece));
    joined += piece;
  }
  chain.push_back(id_of("<|im_end|>"));
  if (joined != kCallText) throw std::runtime_error("the pieces spell " + joined);
  if (std::set<int32_t>(chain.begin(), chain.end() - 1).size() != chain.size() - 1)
    throw std::runtime_error("a token of the chain repeats: it would have two successors");
  const auto bf16_one = [](uint8_t* at) { at[0] = 0x80, at[1] = 0x3f; };
  edit_safetensors(weights, [&](const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
                                uint8_t* data) {
    if (dtype != "BF16") throw std::runtime_error(name + " is " + dtype);
    int64_t elements = 1;
    for (int64_t d : shape) elements *= d;
    const auto zero = [&] { std::memset(data, 0, static_cast<size_t>(elements) * 2); };
    for (const char* suffix : {"o_proj.weight", "out_proj.weight", "down_proj.weight"})
      if (name.ends_with(suffix)) zero();
    const int64_t hidden = shape.size() == 2 ? shape[1] : 0;
    if (name == "model.embed_tokens.weight") {
      for (size_t k = 0; k + 1 < chain.size(); ++k) {
        std::memset(data + chain[k] * hidden * 2, 0, static_cast<size_t>(hidden) * 2);
        bf16_one(data + (chain[k] * hidden + static_cast<int64_t>(k)) * 2);
      }
    }
    if (name == "lm_head.weight") {
      zero();
      for (size_t k = 0; k + 1 < chain.size(); ++k) bf16_one(data + (chain[k + 1] * hidden + static_cast<int64_t>(k)) * 2);
    }
  });
}

// The model folder, written once per test process under `dir`.
fs::path synth_qwen3next(const TempDir& dir) {
  const fs::path out = dir.path() / kModel;
  json config = json::parse(read_text(shared_dir() / "models/tiny-qwen3next-random/config.json"));
  config["vocab_size"] = tokenizer().vocab_size();
  config["bos_token_id"] = id_of("<|endoftext|>");
  config["eos_token_id"] = id_of("<|im_end|>");
  // Qwen3's tokenizer_config.json with the Qwen3-Coder template in place of Qwen3's own.
  json tokenizer_config = json::parse(read_text(tokenizer_dir() / "tokenizer_config.json"));
  tokenizer_config["chat_template"] = read_text(template_file());
  const json generation_config = {{"bos_token_id", id_of("<|endoftext|>")},
                                  {"eos_token_id", json::array({id_of("<|im_end|>"), id_of("<|endoftext|>")})},
                                  {"pad_token_id", id_of("<|endoftext|>")}};
  write_synth_folder(dir.path(), out, config, tokenizer_dir() / "tokenizer.json", tokenizer_config, generation_config);
  script_the_call(out / "model.safetensors");
  return out;
}

// One server per test process (ctest runs each test in its own).
ServerProcess& server() {
  static TempDir dir;
  static ServerProcess s({"--model", synth_qwen3next(dir).string()});
  return s;
}

const NoiseChecks& checks() {
  static const NoiseChecks c(server(), kModel, kMaxTokens);
  return c;
}

// --- The Qwen3-Coder template's rendering, written out from the template ---

// The fixed instructions after the tool list, as the template's string literal holds them.
std::string call_instructions() {
  const std::string t = read_text(template_file());
  const size_t from = t.find("\\n\\nIf you choose to call a function");
  const size_t to = t.find("</IMPORTANT>", from);
  if (from == std::string::npos || to == std::string::npos) throw std::runtime_error("the template's call instructions moved");
  std::string literal = t.substr(from, to + std::strlen("</IMPORTANT>") - from), out;
  for (size_t i = 0; i < literal.size(); ++i) {
    if (literal[i] == '\\' && i + 1 < literal.size() && literal[i + 1] == 'n') {
      out += '\n';
      ++i;
    } else {
      out += literal[i];
    }
  }
  return out;
}

// A system turn with the tools of an Anthropic request (each property with a type and a
// description, and the required list).
std::string system_turn(const std::string& system, const json& tools) {
  std::string s = "<|im_start|>system\n" + system;
  if (!tools.is_null()) {
    s += "\n\n# Tools\n\nYou have access to the following functions:\n\n<tools>";
    for (const json& tool : tools) {
      s += "\n<function>\n<name>" + tool["name"].get<std::string>() + "</name>\n<description>" +
           tool["description"].get<std::string>() + "</description>\n<parameters>";
      const json& schema = tool["input_schema"];
      for (const auto& [name, field] : schema["properties"].items())
        s += "\n<parameter>\n<name>" + name + "</name>\n<type>" + field["type"].get<std::string>() + "</type>\n<description>" +
             field["description"].get<std::string>() + "</description>\n</parameter>";
      s += "\n<required>" + schema["required"].dump() + "</required>\n</parameters>\n</function>";
    }
    s += "\n</tools>" + call_instructions();
  }
  return s + "<|im_end|>\n";
}

std::string user_turn(const std::string& text) { return "<|im_start|>user\n" + text + "<|im_end|>\n"; }

// An assistant turn of calls alone (arguments in order, strings as they are, numbers as JSON),
// then the user turn of their results.
std::string call_turns(const std::vector<std::pair<json, std::string>>& calls_and_results) {
  std::string s = "<|im_start|>assistant";
  for (const auto& [input, result] : calls_and_results) {
    s += "\n<tool_call>\n<function=get_weather>\n";
    for (const auto& [name, value] : input.items())
      s += "<parameter=" + name + ">\n" + (value.is_string() ? value.get<std::string>() : value.dump()) + "\n</parameter>\n";
    s += "</function>\n</tool_call>";
  }
  s += "<|im_end|>\n<|im_start|>user\n";
  for (const auto& [input, result] : calls_and_results) s += "<tool_response>\n" + result + "\n</tool_response>\n";
  return s + "<|im_end|>\n";
}

constexpr const char* kGenerationPrompt = "<|im_start|>assistant\n";

// The prompt of NoiseChecks' Anthropic request (and of its OpenAI twin): system, tool, question.
std::string request_prompt(const json& anthropic) {
  return system_turn(anthropic["system"], anthropic.value("tools", json())) +
         user_turn(anthropic["messages"][0]["content"].get<std::string>());
}

// `j`'s value at `pointer` ("/usage/output_tokens"), null where it has none.
json field(const json& j, const std::string& pointer) {
  const json::json_pointer p(pointer);
  return j.contains(p) ? j.at(p) : json();
}

// What the scripted model answers, as Anthropic content: one call.
const json& scripted_call() {
  static const json call = {{"type", "tool_use"}, {"name", "get_weather"}, {"input", {{"city", "Paris"}}}};
  return call;
}

// `m` (whole or rebuilt from its stream) is the scripted call and nothing else.
void expect_scripted_call(const json& m) {
  SCOPED_TRACE(m.dump());
  ASSERT_TRUE(field(m, "/content").is_array());
  EXPECT_EQ(anthropic_gist(m.at("content")), json::array({scripted_call()}));
  EXPECT_EQ(field(m, "/stop_reason"), json("tool_use"));
  EXPECT_EQ(field(m, "/usage/output_tokens"), kCallOutputTokens);
}

void expect_scripted_openai_call(const json& message, const json& finish_reason) {
  SCOPED_TRACE(message.dump());
  EXPECT_TRUE(field(message, "/content").is_null() || field(message, "/content") == "");
  ASSERT_TRUE(field(message, "/tool_calls").is_array());
  ASSERT_EQ(message.at("tool_calls").size(), 1u);
  EXPECT_EQ(field(message, "/tool_calls/0/function/name"), json("get_weather"));
  EXPECT_EQ(json::parse(field(message, "/tool_calls/0/function/arguments").get<std::string>()), json({{"city", "Paris"}}));
  EXPECT_EQ(finish_reason, json("tool_calls"));
}

TEST(ServeQwen3NextSynth, HealthNamesTheCoderFormatAndThePromptIsTheTemplates) {
  const NoiseChecks& noise = checks();
  auto client = server().client();
  auto health = client.Get("/health");
  ASSERT_TRUE(health);
  ASSERT_EQ(health->status, 200) << health->body;
  const json h = json::parse(health->body);
  EXPECT_EQ(field(h, "/status"), json("ok"));
  EXPECT_EQ(field(h, "/model"), json(kModel));
  EXPECT_EQ(field(h, "/tool_call_format"), json("qwen3-coder-xml"));  // not Hermes: the template writes <function=...>

  // Token for token the template's rendering, generation prompt included: the system prompt and
  // the tool list with each parameter, or the system prompt alone.
  const json plain = noise.anthropic_request();
  json no_tools = plain;
  no_tools.erase("tools");
  EXPECT_EQ(noise.count_tokens(client, plain), token_count(request_prompt(plain) + kGenerationPrompt));
  EXPECT_EQ(noise.count_tokens(client, no_tools), token_count(request_prompt(no_tools) + kGenerationPrompt));
  // The OpenAI form of the same request renders the same prompt.
  const JsonResponse openai = post_json(client, "/v1/chat/completions", noise.openai_request());
  ASSERT_EQ(openai.status, 200) << openai.text << server().log();
  EXPECT_EQ(field(openai.body, "/usage/prompt_tokens"), token_count(request_prompt(plain) + kGenerationPrompt));
}

TEST(ServeQwen3NextSynth, AnthropicCallsWholeStreamedAndTheirResultsReplayed) {
  const NoiseChecks& noise = checks();
  auto client = server().client();
  const json request = noise.anthropic_request();
  const JsonResponse whole = post_json(client, "/v1/messages", request);
  ASSERT_EQ(whole.status, 200) << whole.text << server().log();
  noise.check_anthropic_message(whole.body, noise.count_tokens(client, request));
  expect_scripted_call(whole.body);
  const json streamed = noise.stream(client, "/v1/messages", request);
  ASSERT_FALSE(streamed.is_null());
  noise.check_anthropic_message(streamed, noise.count_tokens(client, request));
  expect_scripted_call(streamed);

  // The call goes back with its result: the template renders both, and the model calls again.
  const json next = anthropic_next_turn(request, whole.body);
  const std::string history = request_prompt(request) + call_turns({{{{"city", "Paris"}}, "18 C, light rain"}});
  EXPECT_EQ(noise.count_tokens(client, next), token_count(history + kGenerationPrompt));
  const JsonResponse second = post_json(client, "/v1/messages", next);
  ASSERT_EQ(second.status, 200) << second.text << server().log();
  noise.check_anthropic_message(second.body, noise.count_tokens(client, next));
  expect_scripted_call(second.body);
  // The second turn reuses the first prompt from the cache.
  EXPECT_GT(field(second.body, "/usage/cache_read_input_tokens"), 0);

  // A history written by the client: two calls in one turn (an integer argument among them) and
  // their results, in order.
  json written = request;
  written["messages"].push_back(
      {{"role", "assistant"},
       {"content", json::array({{{"type", "tool_use"}, {"id", "toolu_01"}, {"name", "get_weather"},
                                 {"input", {{"city", "Paris"}, {"days", 1}}}},
                                {{"type", "tool_use"}, {"id", "toolu_02"}, {"name", "get_weather"}, {"input", {{"city", "Rome"}}}}})}});
  written["messages"].push_back(
      {{"role", "user"},
       {"content", json::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_01"}, {"content", "18 C, light rain"}},
                                {{"type", "tool_result"}, {"tool_use_id", "toolu_02"}, {"content", "24 C, sunny"}}})}});
  const std::string two_calls = request_prompt(request) + call_turns({{{{"city", "Paris"}, {"days", 1}}, "18 C, light rain"},
                                                                      {{{"city", "Rome"}}, "24 C, sunny"}});
  EXPECT_EQ(noise.count_tokens(client, written), token_count(two_calls + kGenerationPrompt));
  const json third = noise.stream(client, "/v1/messages", written);
  ASSERT_FALSE(third.is_null());
  noise.check_anthropic_message(third, noise.count_tokens(client, written));
  expect_scripted_call(third);
}

TEST(ServeQwen3NextSynth, OpenAICallsWholeStreamedAndTheirResultsReplayed) {
  const NoiseChecks& noise = checks();
  auto client = server().client();
  const json request = noise.openai_request();
  const JsonResponse whole = noise.openai_whole_and_streamed(client, request);  // both checked, and alike
  ASSERT_EQ(whole.status, 200) << whole.text << server().log();
  expect_scripted_openai_call(field(whole.body, "/choices/0/message"), field(whole.body, "/choices/0/finish_reason"));
  EXPECT_EQ(field(whole.body, "/usage/completion_tokens"), kCallOutputTokens);
  json with_usage = request;
  with_usage["stream_options"] = {{"include_usage", true}};
  const json streamed = noise.stream(client, "/v1/chat/completions", with_usage);
  ASSERT_FALSE(streamed.is_null());
  ASSERT_EQ(streamed.at("tool_calls").size(), 1u) << streamed.dump();
  EXPECT_EQ(field(streamed, "/tool_calls/0/name"), json("get_weather"));
  EXPECT_EQ(json::parse(field(streamed, "/tool_calls/0/arguments").get<std::string>()), json({{"city", "Paris"}}));
  EXPECT_EQ(field(streamed, "/finish_reason"), json("tool_calls"));

  // The call goes back with its result (arguments as the JSON text OpenAI clients send).
  const json next = openai_next_turn(request, field(whole.body, "/choices/0/message"));
  const std::string history =
      request_prompt(noise.anthropic_request()) + call_turns({{{{"city", "Paris"}}, "18 C, light rain"}});
  const JsonResponse second = post_json(client, "/v1/chat/completions", next);
  ASSERT_EQ(second.status, 200) << second.text << server().log();
  noise.check_openai_completion(second.body);
  EXPECT_EQ(field(second.body, "/usage/prompt_tokens"), token_count(history + kGenerationPrompt));
  expect_scripted_openai_call(field(second.body, "/choices/0/message"), field(second.body, "/choices/0/finish_reason"));

  // A history written by the client: two calls, an integer argument, their results in order.
  json written = request;
  written["messages"].push_back(
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls", json::array({{{"id", "call_01"}, {"type", "function"},
                                    {"function", {{"name", "get_weather"}, {"arguments", R"({"city":"Paris","days":1})"}}}},
                                   {{"id", "call_02"}, {"type", "function"},
                                    {"function", {{"name", "get_weather"}, {"arguments", R"({"city":"Rome"})"}}}}})}});
  written["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_01"}, {"content", "18 C, light rain"}});
  written["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_02"}, {"content", "24 C, sunny"}});
  const std::string two_calls = request_prompt(noise.anthropic_request()) +
                                call_turns({{{{"city", "Paris"}, {"days", 1}}, "18 C, light rain"}, {{{"city", "Rome"}}, "24 C, sunny"}});
  json written_streamed = written;
  written_streamed["stream_options"] = {{"include_usage", true}};
  const json third = noise.stream(client, "/v1/chat/completions", written_streamed);
  ASSERT_FALSE(third.is_null());
  noise.check_openai_stream(third);
  EXPECT_EQ(field(third, "/usage/prompt_tokens"), token_count(two_calls + kGenerationPrompt));
  EXPECT_EQ(third.at("tool_calls").size(), 1u) << third.dump();
  EXPECT_EQ(field(third, "/finish_reason"), json("tool_calls"));
}

// The same output without tools is text, the call's markup as the model wrote it: it is the parser,
// given tools, that makes it a call.
TEST(ServeQwen3NextSynth, WithoutToolsTheCallIsText) {
  const NoiseChecks& noise = checks();
  auto client = server().client();
  json anthropic = noise.anthropic_request();
  anthropic.erase("tools");
  const JsonResponse a = post_json(client, "/v1/messages", anthropic);
  ASSERT_EQ(a.status, 200) << a.text << server().log();
  noise.check_anthropic_message(a.body, noise.count_tokens(client, anthropic));
  ASSERT_TRUE(field(a.body, "/content").is_array()) << a.text;
  EXPECT_EQ(anthropic_gist(a.body.at("content")), json::array({{{"type", "text"}, {"text", kCallText}}}));
  EXPECT_EQ(field(a.body, "/stop_reason"), json("end_turn"));

  json openai = noise.openai_request();
  openai.erase("tools");
  const JsonResponse o = noise.openai_whole_and_streamed(client, openai);
  ASSERT_EQ(o.status, 200) << o.text << server().log();
  EXPECT_EQ(field(o.body, "/choices/0/message/content"), json(kCallText));
  EXPECT_TRUE(field(o.body, "/choices/0/message/tool_calls").is_null());
  EXPECT_EQ(field(o.body, "/choices/0/finish_reason"), json("stop"));
}

}  // namespace
}  // namespace keel::test
