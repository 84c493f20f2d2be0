// The keel command: one binary, one subcommand per job.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string_view>

#include "commands.h"
#include "keel/ops/simd_target.h"
#include "keel/util/error.h"

namespace {

struct Subcommand {
  const char* name;
  const char* summary;
  int (*run)(const keel::cli::CommandArgs&);
};

const Subcommand kSubcommands[] = {
    {"serve", "serve the Anthropic and OpenAI APIs: keel serve --model DIR [--alias NAME]... [--port 4000]",
     keel::cli::serve_command},
    {"run", "generate from a prompt: keel run --model DIR --prompt TEXT | --tokens IDS", keel::cli::run_command},
    {"bench", "measure prefill and decode speed: keel bench --model DIR", keel::cli::bench_command},
    {"synth", "write a random-weight model of a real shape: keel synth --config FILE --dtype bf16|f16|f32|mlx4|mlx8 --out DIR|FILE.gguf [--tokenizer DIR]",
     keel::cli::synth_command},
    {"plan", "will a model and a context fit, under which KV policy: keel plan MODEL_DIR [--context N] [--memory GiB]",
     keel::cli::plan_command},
    {"tokenize", "print token ids: keel tokenize --model DIR | --tokenizer FILE TEXT", keel::cli::tokenize_command},
    {"render", "show the prompt a chat becomes: keel render --model DIR --messages FILE.json [--tools FILE.json] [--roles]",
     keel::cli::render_command},
    {"eval", "measure what KV precision does to tool calls: keel eval fidelity|tools --model DIR ...",
     keel::cli::eval_command},
};

void usage(FILE* out) {
  std::fprintf(out, "keel %s - local LLM inference for coding agents\n\nusage: keel <command> [flags]\n\n",
               KEEL_VERSION);
  for (const auto& c : kSubcommands) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "help") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (std::strcmp(argv[1], "--version") == 0) {
    std::printf("keel %s\n", KEEL_VERSION);
    return 0;
  }
  for (const auto& c : kSubcommands) {
    if (std::string_view(argv[1]) != c.name) continue;
    try {
      keel::ops::apply_simd_target_from_env();  // KEEL_SIMD_TARGET: every command, before any kernel runs
      return c.run(keel::cli::CommandArgs(argv + 2, argv + argc));
    } catch (const keel::Error& e) {
      std::fprintf(stderr, "keel %s: error: %s\n", c.name, e.what());
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "keel %s: internal error: %s\n", c.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "keel: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
