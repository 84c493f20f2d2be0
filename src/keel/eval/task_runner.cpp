#include "keel/eval/task_runner.h"

#include <algorithm>
#include <memory>
#include <optional>

#include "keel/engine/chat_turn.h"
#include "keel/engine/output_constraint.h"
#include "keel/engine/session_cache.h"
#include "keel/kv/kv_footprint.h"
#include "keel/util/error.h"

namespace keel::eval {
namespace {

using json = nlohmann::ordered_json;

bool is_full(const PolicyArm& a) { return a.policy == kv::KvPolicy(); }

bool empty_arguments(const json& args) { return args.is_null() || (args.is_object() && args.empty()); }

template <typename F>
int64_t sum(const std::vector<CaseRun>& runs, F f) {
  int64_t s = 0;
  for (const CaseRun& r : runs) s += f(r);
  return s;
}

struct ArmPlan {
  PolicyArm arm;
  bool reuse;
};

}  // namespace

int64_t TaskArmResult::passes() const { return sum(runs, [](const CaseRun& r) { return r.pass ? 1 : 0; }); }
int64_t TaskArmResult::empty_argument_calls() const {
  return sum(runs, [](const CaseRun& r) { return r.empty_argument_calls; });
}
int64_t TaskArmResult::invalid_calls() const { return sum(runs, [](const CaseRun& r) { return r.invalid_calls; }); }
int64_t TaskArmResult::output_tokens() const { return sum(runs, [](const CaseRun& r) { return r.output_tokens; }); }
int64_t TaskArmResult::retries() const { return sum(runs, [](const CaseRun& r) { return r.retries; }); }
int64_t TaskArmResult::flips() const { return sum(runs, [](const CaseRun& r) { return r.flip ? 1 : 0; }); }
int64_t TaskArmResult::reused_tokens() const { return sum(runs, [](const CaseRun& r) { return r.reused_tokens; }); }
int64_t TaskArmResult::prompt_tokens() const { return sum(runs, [](const CaseRun& r) { return r.prompt_tokens; }); }
double TaskArmResult::pass_rate() const {
  return runs.empty() ? 0.0 : static_cast<double>(passes()) / static_cast<double>(runs.size());
}

uint64_t case_seed(uint64_t base_seed, int run, size_t case_index) {
  return (base_seed + static_cast<uint64_t>(run)) * 1000003ull + case_index;
}

std::string outcome_signature(const CaseRun& r) {
  if (!r.called) return "no call: " + r.text;
  return r.call.name + " " + r.call.arguments.dump();
}

int64_t task_steps(const TaskSuite& suite, size_t policies, size_t reuse_modes, int runs) {
  return static_cast<int64_t>(suite.cases.size() * policies * reuse_modes) * runs;
}

TaskResult run_tasks(ServedModel& model, const TaskSuite& suite, const std::vector<PolicyArm>& policies,
                     const std::vector<bool>& reuse_modes, const TaskOptions& options) {
  if (options.runs < 1) throw Error("--runs must be >= 1");
  if (policies.empty() || reuse_modes.empty()) throw Error("tools: no arm to run");
  std::vector<PolicyArm> arms = policies;
  if (std::none_of(arms.begin(), arms.end(), is_full)) arms.insert(arms.begin(), full_arm());
  // The full arm runs first so that every other arm can be compared with it as it finishes.
  std::stable_partition(arms.begin(), arms.end(), is_full);

  const ModelSpec& spec = model.weights().spec;
  TaskResult result;
  for (int r = 0; r < options.runs; ++r) result.run_seeds.push_back(options.seed + static_cast<uint64_t>(r));

  std::vector<PreparedPrompt> prompts;
  int64_t longest = 0;
  for (const TaskCase& c : suite.cases) {
    try {
      prompts.push_back(model.prepare(c.messages, c.tools, false));
    } catch (const Error& e) {
      throw Error("case '" + c.name + "': " + e.what());
    }
    result.prompt_lengths.push_back(static_cast<int64_t>(prompts.back().ids.size()));
    longest = std::max(longest, result.prompt_lengths.back());
  }
  // Each case's call grammars, compiled once for all its runs.
  std::vector<std::shared_ptr<const OutputGrammars>> grammars(suite.cases.size());
  if (options.constrained)
    for (size_t i = 0; i < suite.cases.size(); ++i) {
      auto g = std::make_shared<OutputGrammars>();
      add_call_grammars(*g, model.tool_call_format().format, suite.cases[i].tools, [](const std::string&) { return true; });
      if (g->any_call || !g->arguments.empty()) grammars[i] = std::move(g);
    }
  const int64_t context = longest + options.max_tokens + 16;
  // Room for several cases' blocks, so the long-lived cache shares and evicts as a server's would.
  const int64_t budget = static_cast<int64_t>(kv::kv_bytes_per_token(spec, kv::KvPolicy(), context) *
                                              static_cast<double>(context)) * 8;

  for (bool reuse : reuse_modes) {
    std::optional<size_t> full_index;  // into result.arms (an index: the vector grows)
    for (const PolicyArm& arm : arms) {
      TaskArmResult out;
      out.arm = arm;
      out.reuse = reuse;
      double kv_bytes = 0, tokens = 0;
      for (const PreparedPrompt& p : prompts) {
        kv_bytes += static_cast<double>(kv::kv_sequence_bytes(spec, arm.policy, p.roles));
        tokens += static_cast<double>(p.ids.size());
      }
      out.kv_bytes_per_token = kv_bytes / tokens;

      std::unique_ptr<SessionCache> session;
      for (int run = 0; run < options.runs; ++run) {
        for (size_t i = 0; i < suite.cases.size(); ++i) {
          if (!session || !reuse) session = std::make_unique<SessionCache>(spec, budget, arm.policy, options.rotate, context);
          const TaskCase& c = suite.cases[i];
          CaseRun cr;
          cr.case_index = i;
          cr.run = run;
          cr.seed = case_seed(options.seed, run, i);
          TurnOptions t;
          t.max_tokens = options.max_tokens;
          t.sampling.temperature = options.temperature;
          t.sampling.top_p = options.top_p;
          t.sampling.seed = cr.seed;
          t.tools = c.tools;
          t.tool_use = !c.call_required ? ToolUse::Auto : c.required_tool.empty() ? ToolUse::Required : ToolUse::Named;
          t.tool_name = c.required_tool;
          t.tool_retries = options.tool_retries;
          t.grammars = grammars[i];
          const TurnResult tr = run_turn(model, *session, prompts[i], t, [&](TurnEvent&& e) {
            if (e.kind == TurnEvent::Kind::ToolCall) {
              if (empty_arguments(e.arguments)) ++cr.empty_argument_calls;
              if (!cr.called) {
                cr.called = true;
                cr.call = ObservedCall{std::move(e.name), std::move(e.arguments)};
              }
            } else if (e.kind == TurnEvent::Kind::Text) {
              cr.text += e.text;
            }
          });
          cr.invalid_calls = tr.stats.invalid_calls;
          cr.retries = tr.stats.retries;
          cr.output_tokens = tr.stats.output_tokens;
          cr.prompt_tokens = tr.stats.prompt_tokens;
          cr.reused_tokens = tr.stats.reused_tokens;
          const CheckOutcome check =
              check_case(c, cr.called ? std::optional<ObservedCall>(cr.call) : std::nullopt);
          cr.pass = check.pass;
          cr.reason = check.reason;
          if (full_index)
            cr.flip = outcome_signature(cr) != outcome_signature(result.arms[*full_index].runs[out.runs.size()]);
          out.runs.push_back(std::move(cr));
          if (options.on_step) options.on_step(arm.label + (reuse ? " reuse" : " fresh") + ": " + c.name);
        }
      }
      result.arms.push_back(std::move(out));
      if (is_full(arm) && !full_index) full_index = result.arms.size() - 1;
    }
  }
  return result;
}

}  // namespace keel::eval
