// Constrained decoding's cost on a real 151,936-row vocabulary (Qwen2.5's tokenizer): building the
// token trie, compiling Claude Code's 22 tool schemas into one Hermes call grammar, and the token
// mask of every step of real calls. A step's mask is what runs between two forward passes, so it
// is reported per step (mean, p99, max, over all steps of the calls) next to the decode step it
// must stay small against. Run from the repository root (the tool schemas are read from
// tests/data/tool_schemas; the tokenizer from $KEEL_SHARED_DIR or ../shared):
//   build/keel_microbench --benchmark_filter=Constrain
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "keel/constrain/token_mask.h"
#include "keel/engine/output_constraint.h"
#include "keel/text/tokenizer.h"

namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

std::string shared_dir() {
  const char* env = std::getenv("KEEL_SHARED_DIR");
  return env ? env : "../shared";
}

const keel::text::Tokenizer& qwen() {
  static const auto tok = keel::text::Tokenizer::from_file(shared_dir() + "/fixtures/tokenizers/qwen2.5");
  return tok;
}

Json claude_code_tools() {
  std::ifstream in("tests/data/tool_schemas/claude-code-no-tool-search.json");
  Json tools = Json::array();
  for (const Json& t : Json::parse(in))
    tools.push_back({{"type", "function"}, {"function", {{"name", t["name"]}, {"parameters", t["schema"]}}}});
  return tools;
}

std::shared_ptr<const keel::OutputGrammars> compile_calls(const Json& tools) {
  auto grammars = std::make_shared<keel::OutputGrammars>();
  keel::add_call_grammars(*grammars, keel::toolcall::ToolCallFormat::Hermes, tools, [](const std::string&) { return true; });
  return grammars;
}

// Calls as Claude Code's model writes them after <tool_call>.
const char* const kCalls[] = {
    "\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"grep -rn \\\"TODO\\\" src/ | head -20\", \"description\": "
    "\"Find the TODOs\", \"timeout\": 120000}}",
    "\n{\"name\": \"Edit\", \"arguments\": {\"file_path\": \"/home/user/project/src/main.cpp\", \"old_string\": "
    "\"int main() {\\n  return 0;\\n}\", \"new_string\": \"int main(int argc, char** argv) {\\n  std::printf(\\\"%d\\\\n\\\", "
    "argc);\\n  return 0;\\n}\"}}",
    "\n{\"name\": \"Read\", \"arguments\": {\"file_path\": \"/home/user/project/README.md\", \"offset\": 10, \"limit\": 200}}",
    "\n{\"name\": \"Write\", \"arguments\": {\"file_path\": \"/tmp/notes.txt\", \"content\": \"Caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87 "
    "\xF0\x9F\x98\x80 \\u00e9\\t\\\"quoted\\\"\"}}",
};

void BM_ConstrainVocabularyBuild(benchmark::State& state) {
  for (auto _ : state) {
    keel::constrain::Vocabulary vocab(qwen(), 151936);
    benchmark::DoNotOptimize(vocab.text_tokens());
  }
}
BENCHMARK(BM_ConstrainVocabularyBuild)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_ConstrainVocabularyWarm(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    keel::constrain::Vocabulary vocab(qwen(), 151936);
    state.ResumeTiming();
    vocab.warm();
  }
}
BENCHMARK(BM_ConstrainVocabularyWarm)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_ConstrainCompileClaudeCodeTools(benchmark::State& state) {
  const Json tools = claude_code_tools();
  size_t nodes = 0;
  for (auto _ : state) nodes = compile_calls(tools)->any_call->nodes.size();
  state.counters["tools"] = static_cast<double>(tools.size());
  state.counters["nodes"] = static_cast<double>(nodes);
}
BENCHMARK(BM_ConstrainCompileClaudeCodeTools)->Unit(benchmark::kMicrosecond);

// Every step's mask of the calls above, each call a new request (a new TokenConstraint). Arg 0:
// cold, a new vocabulary and grammar each time, the vocabulary warmed as keel serve does at
// startup (Vocabulary::warm) and the grammar's own masks computed as they are met (a server's
// first request with this tool set); 1: warm, the same tool set's grammar again (keel serve
// keeps the recent tool sets' grammars, whose masks stay cached), as an agent's every later
// turn; 2: cold without the startup warm-up.
void BM_ConstrainMaskPerStep(benchmark::State& state) {
  const bool warm = state.range(0) == 1;
  const Json tools = claude_code_tools();
  std::shared_ptr<const keel::OutputGrammars> grammars;
  std::unique_ptr<keel::constrain::Vocabulary> vocab;
  std::vector<double> steps;
  for (auto _ : state) {
    state.PauseTiming();
    if (!vocab || !warm) {
      vocab = std::make_unique<keel::constrain::Vocabulary>(qwen(), 151936);
      if (state.range(0) != 2) vocab->warm();
      grammars = compile_calls(tools);
    }
    if (warm && steps.empty()) {  // one pass to warm the shared masks, not counted
      for (const char* call : kCalls) {
        keel::constrain::TokenConstraint c(grammars->any_call, *vocab, true);
        keel::constrain::TokenSet allowed(vocab->rows());
        for (int32_t id : qwen().encode(call)) {
          c.allowed(allowed);
          c.accept(id);
        }
      }
    }
    state.ResumeTiming();
    for (const char* call : kCalls) {
      keel::constrain::TokenConstraint c(grammars->any_call, *vocab, true);
      keel::constrain::TokenSet allowed(vocab->rows());
      for (int32_t id : qwen().encode(call)) {
        const auto t0 = Clock::now();
        c.allowed(allowed);
        steps.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        if (!allowed.test(id)) state.SkipWithError("a call's own token was masked");
        c.accept(id);
      }
    }
  }
  std::sort(steps.begin(), steps.end());
  double sum = 0;
  for (double s : steps) sum += s;
  state.counters["steps"] = static_cast<double>(steps.size());
  state.counters["mean_us"] = sum / static_cast<double>(steps.size());
  state.counters["p50_us"] = steps[steps.size() / 2];
  state.counters["p99_us"] = steps[std::min(steps.size() - 1, steps.size() * 99 / 100)];
  state.counters["max_us"] = steps.back();
}
BENCHMARK(BM_ConstrainMaskPerStep)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
