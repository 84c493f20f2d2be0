// keel plan MODEL_DIR_OR_CONFIG [--context N] [--kv-policy P] [--memory GiB] [--weights FORMAT]
//           [--chat-template FILE] [--json]
#include <cstdio>

#include "args.h"
#include "commands.h"
#include "keel/arch/model_source.h"
#include "keel/plan/plan_json.h"
#include "keel/plan/plan_text.h"
#include "keel/plan/planner.h"
#include "keel/util/error.h"

namespace keel::cli {
namespace {

constexpr const char* kUsage =
    "usage: keel plan MODEL_DIR_OR_CONFIG [--context N|Nk] [--kv-policy auto|full|int8|protect|int4]\n"
    "                 [--memory GiB] [--weights bf16|f16|f32|mlx4|mlx8|mlx4-g32|...|mxfp4]\n"
    "                 [--chat-template FILE] [--json]";

// "32768" or "32k" (x 1024), the way context lengths are usually quoted.
int64_t parse_context(const std::string& text) {
  std::string digits = text;
  int64_t scale = 1;
  if (!digits.empty() && (digits.back() == 'k' || digits.back() == 'K')) {
    digits.pop_back();
    scale = 1024;
  }
  // A trillion tokens is far past any model; the bound keeps the arithmetic from overflowing.
  try {
    return parse_int_flag("context", digits, 1, (1L << 40) / scale) * scale;
  } catch (const Error&) {
    throw Error("--context must be a positive number of tokens up to 2^40 (e.g. 32768 or 32k), got '" + text + "'");
  }
}

}  // namespace

int plan_command(const CommandArgs& argv) {
  Args args(argv, {"context", "kv-policy", "memory", "chat-template", "weights"}, {"json", "help"});
  if (args.has("help")) {
    std::printf("%s\n", kUsage);
    return 0;
  }
  if (args.positional().size() != 1) throw Error(std::string("expected one model folder or config.json\n") + kUsage);

  plan::PlanRequest request;
  if (auto c = args.get("context")) request.context = parse_context(*c);
  if (auto p = args.get("kv-policy")) request.policy = plan::parse_kv_preset(*p);
  if (auto m = args.get("memory")) request.memory_gib = parse_number_flag("memory", *m, 0, kMaxGiB, true);
  if (auto t = args.get("chat-template")) request.chat_template = *t;
  if (auto w = args.get("weights")) request.weights_format = *w;

  const plan::Plan plan = plan::plan_model(arch::resolve_model(args.positional()[0]), request);
  if (args.has("json")) {
    std::printf("%s\n", plan::plan_to_json(plan).dump(2).c_str());
  } else {
    std::fputs(plan::format_plan_text(plan).c_str(), stdout);
  }
  return 0;
}

}  // namespace keel::cli
