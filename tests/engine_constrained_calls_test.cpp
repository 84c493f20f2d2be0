// Constrained tool calls, per format (engine/output_constraint.h): a scripted model that means to
// write an invalid call (a string left unquoted, as weak models do) writes a valid one when its
// call is decoded under the tool's grammar, and an invalid one (regenerated, then reported) when
// it is not. The model prefers the invalid text; where the grammar refuses its next token, its
// second choice is the valid text, as a real model's distribution has more than one candidate.
// The forward passes are the bundled tool caller's, served as each format (its call markers
// renamed to the format's control tokens, as the Harmony stream tests do); only the preferences
// are scripted.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "keel/constrain/matcher.h"
#include "keel/engine/chat_turn.h"
#include "keel/engine/output_constraint.h"
#include "keel/kv/kv_footprint.h"
#include "keel/toolcall/gemma_args.h"
#include "server_support.h"
#include "test_support.h"
#include "tokenizer_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;

json weather_tool() {
  return json::parse(R"([{"type":"function","function":{"name":"get_weather","description":"Weather for a city",
    "parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["celsius","fahrenheit"]}},
    "required":["city","unit"]}}}])");
}

struct Family {
  std::string label;
  toolcall::ToolCallFormat format;
  std::vector<std::pair<std::string, std::string>> renamed;  // the tool caller's markers, renamed
  std::string invalid, valid;  // the model's first and second choice of output
};

ServedModel& load(const Family& f) {
  static std::map<std::string, std::pair<std::unique_ptr<TempDir>, std::unique_ptr<ServedModel>>> models;
  auto& [dir, model] = models[f.label];
  if (!model) {
    dir = std::make_unique<TempDir>();
    const auto src = tiny_toolcaller_dir();
    for (const char* file : {"config.json", "generation_config.json", "model.safetensors", "tokenizer_config.json"})
      std::filesystem::copy_file(src / file, dir->path() / file);
    write_tokenizer_with_specials(src / "tokenizer.json", dir->path() / "tokenizer.json", f.renamed);
    model = std::make_unique<ServedModel>(arch::resolve_model(dir->path()),
                                          ServedModelOptions{.threads = 1, .tool_call_format = f.format});
  }
  return *model;
}

struct Outcome {
  std::vector<std::string> calls;  // "name arguments"
  TurnStats stats;
};

// Each token's text, and the preference: the longest token that continues the first of `texts`
// the output so far is a prefix of scores 100, the same for the next text 50; a finished text
// prefers the end of sequence.
Outcome run(ServedModel& model, const std::vector<std::string>& texts, bool constrained) {
  const text::Tokenizer& tok = model.tokenizer();
  std::vector<std::string> token_text(static_cast<size_t>(model.weights().spec.vocab_size));
  for (size_t id = 0; id < std::min(token_text.size(), tok.vocab_size()); ++id) {
    try {
      token_text[id] = tok.decode(std::vector<int32_t>{static_cast<int32_t>(id)});
    } catch (const Error&) {
    }
  }
  const int32_t eos = model.weights().eos_token_ids.front();
  TurnOptions o;
  o.tools = weather_tool();
  o.max_tokens = 400;
  o.sampling.temperature = 0;
  o.logits_processor = [&](std::span<const int32_t> generated, std::span<float> logits) {
    const std::string so_far = tok.decode(generated);
    for (float& l : logits) l = 0.0f;
    float score = 100.0f;
    for (const std::string& text : texts) {
      if (!text.starts_with(so_far)) continue;
      const std::string_view rest = std::string_view(text).substr(so_far.size());
      int32_t best = eos;
      size_t best_size = 0;
      for (size_t id = 0; id < token_text.size() && !rest.empty(); ++id)
        if (token_text[id].size() > best_size && rest.starts_with(token_text[id])) {
          best = static_cast<int32_t>(id);
          best_size = token_text[id].size();
        }
      logits[static_cast<size_t>(best)] = std::max(logits[static_cast<size_t>(best)], score);
      score /= 2;
    }
    if (score == 100.0f) logits[static_cast<size_t>(eos)] = 100.0f;  // off every script: stop
  };
  if (constrained) {
    auto grammars = std::make_shared<OutputGrammars>();
    add_call_grammars(*grammars, model.tool_call_format().format, o.tools, [](const std::string&) { return true; });
    EXPECT_TRUE(grammars->any_call || !grammars->arguments.empty());
    o.grammars = grammars;
  }
  const PreparedPrompt prompt =
      model.prepare(json::parse(R"([{"role":"user","content":"Weather in Paris?"}])"), o.tools, false);
  const ModelSpec& spec = model.weights().spec;
  const int64_t context = 2048;
  SessionCache session(spec, static_cast<int64_t>(kv::kv_bytes_per_token(spec, kv::KvPolicy(), context) * context) * 2,
                       kv::KvPolicy(), true, context);
  Outcome out;
  const TurnResult r = run_turn(model, session, prompt, o, [&](TurnEvent&& e) {
    if (e.kind == TurnEvent::Kind::ToolCall) out.calls.push_back(e.name + " " + e.arguments.dump());
  });
  out.stats = r.stats;
  return out;
}

class ConstrainedCalls : public ::testing::TestWithParam<Family> {};

TEST_P(ConstrainedCalls, TheGrammarTurnsTheModelsInvalidCallIntoAValidOne) {
  const Family& f = GetParam();
  ServedModel& model = load(f);
  ASSERT_EQ(model.tool_call_format().format, f.format);

  const Outcome free = run(model, {f.invalid, f.valid}, false);
  EXPECT_TRUE(free.calls.empty());
  EXPECT_EQ(free.stats.invalid_calls, 1);
  EXPECT_EQ(free.stats.retries, 2);

  const Outcome constrained = run(model, {f.invalid, f.valid}, true);
  ASSERT_EQ(constrained.calls.size(), 1u);
  EXPECT_EQ(constrained.calls[0], R"(get_weather {"city":"Paris","unit":"celsius"})");
  EXPECT_EQ(constrained.stats.invalid_calls, 0);
  EXPECT_EQ(constrained.stats.retries, 0);
  EXPECT_GT(constrained.stats.constrained_tokens, 5);
}

// Qwen3-Coder's XML call grammar, byte by byte: parameters in the schema's order, the required
// ones always and the optional ones or not; raw text where a string may go, JSON where the schema
// allows no string, an enum's values; a tool that is not constrained takes anything.
TEST(ConstrainedCallGrammars, Qwen3CoderXmlParameters) {
  const json tools = json::parse(R"([{"type":"function","function":{"name":"Bash","parameters":{"type":"object",
    "properties":{"command":{"type":"string"},"timeout":{"type":"integer"},"mode":{"enum":["fast","safe"]},
    "env":{"type":"object","properties":{"A":{"type":"boolean"}}}},"required":["command"]}}},
    {"type":"function","function":{"name":"Free","parameters":{"type":"object"}}}])");
  OutputGrammars grammars;
  add_call_grammars(grammars, toolcall::ToolCallFormat::Qwen3CoderXml, tools, [](const std::string& name) { return name == "Bash"; });
  ASSERT_NE(grammars.any_call, nullptr);
  auto matches = [&](const std::string& call) {
    constrain::Matcher m(*grammars.any_call, false);
    constrain::MatchState s = m.start();
    return m.advance(s, call) && m.accepting(s);
  };
  auto param = [](const std::string& key, const std::string& value) { return "<parameter=" + key + ">\n" + value + "\n</parameter>\n"; };
  const std::string open = "\n<function=Bash>\n", close = "</function>";
  EXPECT_TRUE(matches(open + param("command", "ls \"a b\"\necho \\n") + close));
  EXPECT_TRUE(matches(open + param("command", "ls") + param("timeout", "30") + param("mode", "safe") +
                      param("env", "{\"A\": true}") + close));
  EXPECT_FALSE(matches(open + param("timeout", "30") + close));                          // command is required
  EXPECT_FALSE(matches(open + param("command", "ls") + param("timeout", "thirty") + close));  // not an integer
  EXPECT_FALSE(matches(open + param("command", "ls") + param("mode", "slow") + close));       // not in the enum
  EXPECT_FALSE(matches(open + param("command", "ls") + param("env", "{\"A\": 1}") + close));  // A is a boolean
  EXPECT_FALSE(matches(open + param("command", "ls") + param("user", "me") + close));         // undeclared
  EXPECT_FALSE(matches(open + param("timeout", "30") + param("command", "ls") + close));      // the schema's order
  // The tags without the template's newlines, as models also write them.
  EXPECT_TRUE(matches("<function=Bash><parameter=command>ls</parameter><parameter=timeout>30</parameter></function>"));
  EXPECT_TRUE(matches("\n<function=Free>\n<parameter=anything>\nat all\n</parameter>\n</function>"));
  EXPECT_FALSE(matches("\n<function=Other>\n</function>"));
}

// Gemma 4's call grammar: bare keys, strings between <|"|> markers as raw text, JSON scalars and
// arrays, nested objects; every call it accepts reads back (toolcall/gemma_args.h) as the
// arguments it spells.
TEST(ConstrainedCallGrammars, Gemma4Arguments) {
  const json tools = json::parse(R"([{"type":"function","function":{"name":"Bash","parameters":{"type":"object",
    "properties":{"command":{"type":"string"},"timeout":{"type":"integer"},"env":{"type":"object",
    "additionalProperties":{"type":"string"}},"flags":{"type":"array","items":{"type":"boolean"}},
    "mode":{"enum":["fast","safe",null]}},"required":["command"]}}}])");
  OutputGrammars grammars;
  add_call_grammars(grammars, toolcall::ToolCallFormat::Gemma4, tools, [](const std::string&) { return true; });
  ASSERT_NE(grammars.any_call, nullptr);
  auto matches = [&](const std::string& call) {
    constrain::Matcher m(*grammars.any_call, false);
    constrain::MatchState s = m.start();
    return m.advance(s, call) && m.accepting(s);
  };
  const std::string q = "<|\"|>";
  const std::string full = "call:Bash{command:" + q + "echo \"hi\"\nls {a,b}: done" + q + ",timeout:30,env:{HOME:" + q +
                           "/root" + q + ",LANG:" + q + "C" + q + "},flags:[true,false],mode:null}";
  EXPECT_TRUE(matches(full));
  const toolcall::GemmaValue read = toolcall::parse_gemma_value(full, full.find('{'));
  ASSERT_EQ(read.status, toolcall::GemmaValue::Status::Complete) << read.error;
  EXPECT_EQ(read.value.dump(), R"({"command":"echo \"hi\"\nls {a,b}: done","timeout":30,"env":{"HOME":"/root","LANG":"C"},)"
                               R"("flags":[true,false],"mode":null})");
  EXPECT_TRUE(matches("call:Bash{mode:" + q + "safe" + q + ",command:" + q + q + "}"));  // any order, an empty string
  EXPECT_FALSE(matches("call:Bash{timeout:30}"));                                        // command is required
  EXPECT_FALSE(matches("call:Bash{command:\"ls\"}"));                                   // strings are <|"|>-quoted
  EXPECT_FALSE(matches("call:Bash{command:" + q + "ls" + q + ",timeout:" + q + "30" + q + "}"));  // an integer
  EXPECT_FALSE(matches("call:Bash{command:" + q + "ls" + q + ",mode:" + q + "slow" + q + "}"));   // not in the enum
  EXPECT_FALSE(matches("call:Bash{command:" + q + "ls" + q + ",user:" + q + "me" + q + "}"));     // undeclared
  EXPECT_FALSE(matches("call:Bash{command:" + q + "ls" + q + ",env:{HOME:1}}"));                   // env takes strings
  EXPECT_FALSE(matches("call:Other{}"));
}

INSTANTIATE_TEST_SUITE_P(
    Formats, ConstrainedCalls,
    ::testing::Values(
        Family{"Hermes", toolcall::ToolCallFormat::Hermes, {},
               "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": Paris, \"unit\": \"celsius\"}}\n</tool_call>",
               "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>"},
        // Qwen3-Coder: an enum's value out of its set (a string type is raw text, never invalid).
        Family{"Qwen3CoderXml", toolcall::ToolCallFormat::Qwen3CoderXml, {},
               "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=unit>\nkelvin\n"
               "</parameter>\n</function>\n</tool_call>",
               "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=unit>\ncelsius\n"
               "</parameter>\n</function>\n</tool_call>"},
        Family{"Llama3", toolcall::ToolCallFormat::Llama3Json, {{"<tool_call>", "<|python_tag|>"}},
               "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": Paris, \"unit\": \"celsius\"}}",
               "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}"},
        // Mistral's two forms: an array of calls (v3 tokenizers), the tool named before [ARGS] (v11 on).
        Family{"MistralArray", toolcall::ToolCallFormat::Mistral, {{"<tool_call>", "[TOOL_CALLS]"}},
               "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": Paris, \"unit\": \"celsius\"}}]",
               "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}]"},
        Family{"MistralArgs", toolcall::ToolCallFormat::Mistral, {{"<tool_call>", "[TOOL_CALLS]"}, {"</tool_call>", "[ARGS]"}},
               "[TOOL_CALLS]get_weather[ARGS]{\"city\": Paris, \"unit\": \"celsius\"}",
               "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\", \"unit\": \"celsius\"}"},
        // Gemma 4: strings between <|"|> control tokens, keys bare; an enum's value out of its set.
        Family{"Gemma4", toolcall::ToolCallFormat::Gemma4,
               {{"<tool_call>", "<|tool_call>"}, {"</tool_call>", "<tool_call|>"}, {"<|im_start|>", "<|\"|>"}},
               "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,unit:<|\"|>kelvin<|\"|>}<tool_call|>",
               "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,unit:<|\"|>celsius<|\"|>}<tool_call|>"},
        Family{"Harmony", toolcall::ToolCallFormat::Harmony, {{"<tool_call>", "<|call|>"}, {"</tool_call>", "<|return|>"}},
               "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": Paris, \"unit\": \"celsius\"}<|call|>",
               "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\", \"unit\": \"celsius\"}<|call|>"}),
    [](const auto& info) { return info.param.label; });

}  // namespace
}  // namespace keel::test
