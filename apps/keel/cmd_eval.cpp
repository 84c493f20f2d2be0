// keel eval: controlled measurements of what KV precision does to a model's tool calls.
//   keel eval fidelity --model DIR --transcripts FILE.jsonl --policies full,int8,int4,protect
//                      [--weights-baseline DIR] [--out PREFIX]
//   keel eval tools --model DIR --suite FILE.json --policies ... --runs N [--reuse on|off|both]
//                   [--out PREFIX]
//   keel eval record --model DIR --session FILE.json --out FILE.jsonl   (builds transcripts)
// Reports go to stdout as Markdown; --out PREFIX also writes PREFIX.md, PREFIX.json, PREFIX.svg.
#include <algorithm>
#include <climits>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "args.h"
#include "commands.h"
#include "keel/arch/model_source.h"
#include "keel/engine/served_model.h"
#include "keel/eval/fidelity.h"
#include "keel/eval/progress.h"
#include "keel/eval/reports.h"
#include "keel/eval/task_runner.h"
#include "keel/eval/transcript_recorder.h"
#include "keel/util/error.h"

namespace keel::cli {
namespace {

using json = nlohmann::ordered_json;

constexpr const char* kDefaultPolicies = "full,int8,int4,protect";

std::string command_line(const char* mode, const CommandArgs& argv) {
  std::string s = std::string("keel eval ") + mode;
  for (const std::string& a : argv) s += " " + (a.find(' ') == std::string::npos ? a : "'" + a + "'");
  return s;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out || !(out << text)) throw Error("cannot write " + path);
  std::fprintf(stderr, "wrote %s\n", path.c_str());
}

void write_reports(const Args& args, const std::string& markdown, const json& report, const std::string& svg) {
  std::fputs(markdown.c_str(), stdout);
  if (const auto prefix = args.get("out")) {
    write_file(*prefix + ".md", markdown);
    write_file(*prefix + ".json", report.dump(2) + "\n");
    write_file(*prefix + ".svg", svg);
  }
}

bool rotate_flag(const Args& args) {
  const std::string v = args.get_or("kv-rotate", "on");
  if (v != "on" && v != "off") throw Error("--kv-rotate must be on or off");
  return v == "on";
}

std::unique_ptr<ServedModel> load(const std::string& dir, const Args& args) {
  ServedModelOptions o;
  o.threads = static_cast<int>(args.get_int("threads", 0, 0, kMaxThreads));
  return std::make_unique<ServedModel>(arch::resolve_model(dir), o);
}

eval::ReportHeader base_header(const char* mode, const ServedModel& model, const CommandArgs& argv) {
  eval::ReportHeader h;
  h.mode = mode;
  h.model = model.dir().string();
  h.weight_format = model.weights().formats_text();
  h.machine = eval::describe_machine();
  h.command = command_line(mode, argv);
  return h;
}

int fidelity(const CommandArgs& argv) {
  Args args(argv, {"model", "transcripts", "policies", "weights-baseline", "out", "threads", "chunk", "kv-rotate"},
            {"progress"});
  eval::FidelityOptions options;
  options.chunk = args.get_int("chunk", 128, 1, kMaxTokenCount);  // before anything loads
  auto model = load(args.require("model"), args);
  std::unique_ptr<ServedModel> baseline;
  if (args.has("weights-baseline")) baseline = load(args.require("weights-baseline"), args);
  ServedModel& reference = baseline ? *baseline : *model;
  const auto transcripts = eval::load_transcripts(args.require("transcripts"));
  const auto arms = eval::parse_policy_list(args.get_or("policies", kDefaultPolicies));

  options.rotate = rotate_flag(args);
  eval::Progress progress(eval::fidelity_steps(*model, transcripts, options.chunk),
                          args.has("progress") || eval::Progress::stderr_is_terminal());
  options.on_step = [&](const std::string& label) { progress.step(label); };
  const eval::FidelityResult result = eval::run_fidelity(reference, *model, transcripts, arms, options);
  progress.finish();

  eval::ReportHeader h = base_header("fidelity", *model, argv);
  if (baseline) {
    h.baseline_model = baseline->dir().string();
    h.baseline_weight_format = baseline->weights().formats_text();
  }
  h.data = args.require("transcripts");
  h.policies = arms;
  h.rotate = options.rotate;
  h.prompts = eval::summarize_lengths(result.prompt_lengths);
  write_reports(args, eval::fidelity_markdown(h, result), eval::fidelity_json(h, result), eval::fidelity_svg(h, result));
  return 0;
}

int tools(const CommandArgs& argv) {
  Args args(argv,
            {"model", "suite", "policies", "runs", "reuse", "seed", "temperature", "max-tokens", "out", "threads",
             "kv-rotate", "constrained"},
            {"progress"});
  // Numbers first: a bad one is refused before anything loads.
  eval::TaskOptions options;
  options.runs = static_cast<int>(args.get_int("runs", 3, 1, 1000));
  options.seed = static_cast<uint64_t>(args.get_int("seed", 1, 0, LONG_MAX));
  options.temperature = args.get_double("temperature", options.temperature, 0, kMaxTemperature);
  options.max_tokens = args.get_int("max-tokens", options.max_tokens, 1, kMaxTokenCount);
  const std::string constrained = args.get_or("constrained", "off");
  if (constrained != "on" && constrained != "off") throw Error("--constrained must be on or off");
  options.constrained = constrained == "on";
  auto model = load(args.require("model"), args);
  const eval::TaskSuite suite = eval::load_suite(args.require("suite"));
  const auto arms = eval::parse_policy_list(args.get_or("policies", kDefaultPolicies));
  const std::string reuse = args.get_or("reuse", "both");
  std::vector<bool> reuse_modes;
  if (reuse == "on") reuse_modes = {true};
  else if (reuse == "off") reuse_modes = {false};
  else if (reuse == "both") reuse_modes = {true, false};
  else throw Error("--reuse must be on, off or both");

  options.rotate = rotate_flag(args);
  const size_t arm_count = arms.size() + (std::any_of(arms.begin(), arms.end(),
                                                      [](const eval::PolicyArm& a) { return a.policy == kv::KvPolicy(); })
                                              ? 0
                                              : 1);
  eval::Progress progress(eval::task_steps(suite, arm_count, reuse_modes.size(), options.runs),
                          args.has("progress") || eval::Progress::stderr_is_terminal());
  options.on_step = [&](const std::string& label) { progress.step(label); };
  const eval::TaskResult result = eval::run_tasks(*model, suite, arms, reuse_modes, options);
  progress.finish();

  eval::ReportHeader h = base_header("tools", *model, argv);
  h.data = args.require("suite");
  for (const auto& a : result.arms)
    if (std::none_of(h.policies.begin(), h.policies.end(), [&](const eval::PolicyArm& p) { return p.label == a.arm.label; }))
      h.policies.push_back(a.arm);
  h.rotate = options.rotate;
  h.prompts = eval::summarize_lengths(result.prompt_lengths);
  h.runs = options.runs;
  h.seeds = result.run_seeds;
  h.temperature = options.temperature;
  h.reuse = reuse;
  h.constrained = constrained;
  write_reports(args, eval::tasks_markdown(h, suite, result), eval::tasks_json(h, suite, result),
                eval::tasks_svg(h, result));
  return 0;
}

int record(const CommandArgs& argv) {
  Args args(argv, {"model", "session", "out", "threads"});
  auto model = load(args.require("model"), args);
  const std::string session_path = args.require("session");
  std::ifstream in(session_path, std::ios::binary);
  if (!in) throw Error("cannot read " + session_path);
  std::ostringstream ss;
  ss << in.rdbuf();
  const json session = json::parse(ss.str(), nullptr, false);
  if (session.is_discarded()) throw Error(session_path + " is not valid JSON");
  std::string lines;
  for (const auto& request : eval::requests_from_session(session, session_path))
    lines += eval::transcript_line(eval::record_transcript(*model, request)) + "\n";
  if (const auto out = args.get("out")) write_file(*out, lines);
  else std::fputs(lines.c_str(), stdout);
  return 0;
}

}  // namespace

int eval_command(const CommandArgs& argv) {
  if (argv.empty()) throw Error("usage: keel eval fidelity|tools|record [flags] (see docs/eval.md)");
  const std::string mode = argv[0];
  const CommandArgs rest(argv.begin() + 1, argv.end());
  if (mode == "fidelity") return fidelity(rest);
  if (mode == "tools") return tools(rest);
  if (mode == "record") return record(rest);
  throw Error("unknown eval mode '" + mode + "' (expected fidelity, tools or record)");
}

}  // namespace keel::cli
