#include "keel/eval/reports.h"

#include <cstdio>
#include <filesystem>
#include <sstream>

#include "keel/eval/svg_chart.h"

namespace keel::eval {
namespace {

using json = nlohmann::ordered_json;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// KL values span many decades (0 for identical arms, 1e-6 for int8, 1 for a broken arm).
std::string kl(double v) { return v == 0 ? "0" : fmt("%.3g", v); }

std::string model_name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

std::string cell(const std::string& s) { return markdown_cell(s); }

}  // namespace

json fidelity_json(const ReportHeader& header, const FidelityResult& result) {
  json arms = json::array();
  for (const ArmFidelity& a : result.arms) {
    json groups = json::object();
    for (RoleGroup g : kAllRoleGroups) groups[std::string(role_group_name(g))] = a.by_group[static_cast<size_t>(g)].to_json();
    json distance = json::object(), calls = json::object();
    for (size_t b = 0; b < kDistanceBucketCount; ++b) {
      distance[distance_bucket_name(b)] = a.by_distance[b].to_json();
      calls[distance_bucket_name(b)] = a.tool_call_by_distance[b].to_json();
    }
    arms.push_back({{"label", a.arm.label},
                    {"spec", a.arm.policy.describe()},
                    {"kv_bytes_per_token", a.kv_bytes_per_token},
                    {"overall", a.overall.to_json()},
                    {"by_role", groups},
                    {"by_distance_from_end", distance},
                    {"tool_call_by_distance_from_end", calls}});
  }
  return {{"header", header_json(header)}, {"prompt_lengths", result.prompt_lengths}, {"arms", arms}};
}

std::string fidelity_markdown(const ReportHeader& header, const FidelityResult& result) {
  std::ostringstream o;
  o << "# keel eval fidelity: " << model_name(header.model) << "\n\n" << header_markdown(header) << "\n";
  o << "KL(reference || arm) in nats per predicted token; a flip is a position whose top-1 token differs "
       "from the reference's.\n\n";
  o << "| arm | KV bytes/token | positions | mean KL | p99 KL | max KL | top-1 agreement | flips / 10k |\n";
  o << "|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const ArmFidelity& a : result.arms) {
    const DivergenceStats& s = a.overall;
    o << "| " << cell(a.arm.label) << " | " << fmt("%.0f", a.kv_bytes_per_token) << " | " << s.positions() << " | "
      << kl(s.mean_kl()) << " | " << kl(s.p99_kl()) << " | " << kl(s.max_kl()) << " | "
      << fmt("%.2f %%", 100 * s.top1_agreement()) << " | " << fmt("%.1f", s.flips_per_10k()) << " |\n";
  }
  o << "\n## By role of the predicted token\n\n";
  o << "| arm | role | positions | mean KL | p99 KL | max KL | flips / 10k |\n";
  o << "|---|---|---:|---:|---:|---:|---:|\n";
  for (const ArmFidelity& a : result.arms)
    for (RoleGroup g : kAllRoleGroups) {
      const DivergenceStats& s = a.by_group[static_cast<size_t>(g)];
      if (s.positions() == 0) continue;
      o << "| " << cell(a.arm.label) << " | " << role_group_name(g) << " | " << s.positions() << " | " << kl(s.mean_kl())
        << " | " << kl(s.p99_kl()) << " | " << kl(s.max_kl()) << " | " << fmt("%.1f", s.flips_per_10k()) << " |\n";
    }
  o << "\n## By distance of the predicted token from the transcript's end\n\n";
  o << "Tokens before the last one; a quantizing policy stores everything past its recent window below bf16.\n\n";
  o << "| arm | tokens from the end | positions | mean KL | p99 KL | max KL | flips / 10k | tool_call positions | "
       "tool_call flips / 10k |\n";
  o << "|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const ArmFidelity& a : result.arms)
    for (size_t b = 0; b < kDistanceBucketCount; ++b) {
      const DivergenceStats& s = a.by_distance[b];
      const DivergenceStats& c = a.tool_call_by_distance[b];
      if (s.positions() == 0) continue;
      o << "| " << cell(a.arm.label) << " | " << distance_bucket_name(b) << " | " << s.positions() << " | "
        << kl(s.mean_kl()) << " | " << kl(s.p99_kl()) << " | " << kl(s.max_kl()) << " | "
        << fmt("%.1f", s.flips_per_10k()) << " | " << c.positions() << " | " << fmt("%.1f", c.flips_per_10k()) << " |\n";
    }
  return o.str();
}

std::string fidelity_svg(const ReportHeader& header, const FidelityResult& result) {
  ScatterChart chart;
  chart.title = "keel eval fidelity: " + model_name(header.model) + " (" + header.weight_format + ")";
  chart.x_label = "KV bytes/token";
  chart.y_label = "flips / 10k positions";
  chart.series = {{"all positions", {}}, {"tool_call positions", {}}};
  for (const ArmFidelity& a : result.arms) {
    chart.series[0].points.push_back({a.arm.label, a.kv_bytes_per_token, a.overall.flips_per_10k()});
    const DivergenceStats& calls = a.by_group[static_cast<size_t>(RoleGroup::tool_call)];
    if (calls.positions() > 0) chart.series[1].points.push_back({a.arm.label, a.kv_bytes_per_token, calls.flips_per_10k()});
  }
  return render_scatter_svg(chart);
}

std::string task_arm_name(const TaskArmResult& arm) {
  return arm.arm.label + (arm.reuse ? " reuse on" : " reuse off");
}

json tasks_json(const ReportHeader& header, const TaskSuite& suite, const TaskResult& result) {
  json arms = json::array();
  for (const TaskArmResult& a : result.arms) {
    json runs = json::array();
    for (const CaseRun& r : a.runs) {
      json jr = {{"case", suite.cases[r.case_index].name}, {"run", r.run}, {"seed", r.seed}, {"pass", r.pass}};
      if (r.called) jr["call"] = {{"name", r.call.name}, {"arguments", r.call.arguments}};
      if (!r.pass) jr["reason"] = r.reason;
      jr["empty_argument_calls"] = r.empty_argument_calls;
      jr["invalid_calls"] = r.invalid_calls;
      jr["retries"] = r.retries;
      jr["flip"] = r.flip;
      jr["prompt_tokens"] = r.prompt_tokens;
      jr["reused_tokens"] = r.reused_tokens;
      runs.push_back(std::move(jr));
    }
    arms.push_back({{"label", a.arm.label},
                    {"spec", a.arm.policy.describe()},
                    {"reuse", a.reuse},
                    {"kv_bytes_per_token", a.kv_bytes_per_token},
                    {"requests", a.runs.size()},
                    {"passes", a.passes()},
                    {"pass_rate", a.pass_rate()},
                    {"empty_argument_calls", a.empty_argument_calls()},
                    {"invalid_calls", a.invalid_calls()},
                    {"retries", a.retries()},
                    {"output_tokens", a.output_tokens()},
                    {"flips_vs_full", a.flips()},
                    {"prompt_tokens", a.prompt_tokens()},
                    {"reused_tokens", a.reused_tokens()},
                    {"runs", runs}});
  }
  return {{"header", header_json(header)}, {"suite", suite.name}, {"cases", suite.cases.size()}, {"arms", arms}};
}

std::string tasks_markdown(const ReportHeader& header, const TaskSuite& suite, const TaskResult& result) {
  std::ostringstream o;
  o << "# keel eval tools: " << model_name(header.model) << " on " << suite.name << "\n\n" << header_markdown(header) << "\n";
  o << "| arm | KV bytes/token | pass | pass rate | empty-argument calls | invalid calls | retries | tokens out | "
       "flips vs full | prompt tokens reused |\n";
  o << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const TaskArmResult& a : result.arms) {
    const double reused = a.prompt_tokens() ? 100.0 * static_cast<double>(a.reused_tokens()) / static_cast<double>(a.prompt_tokens()) : 0;
    o << "| " << cell(task_arm_name(a)) << " | " << fmt("%.0f", a.kv_bytes_per_token) << " | " << a.passes() << "/"
      << a.runs.size() << " | " << fmt("%.1f %%", 100 * a.pass_rate()) << " | " << a.empty_argument_calls() << " | "
      << a.invalid_calls() << " | " << a.retries() << " | " << a.output_tokens() << " | " << a.flips() << " | "
      << fmt("%.0f %%", reused) << " |\n";
  }
  o << "\n## Per case: passes / runs (flips against the full arm with the same reuse)\n\n| case |";
  for (const TaskArmResult& a : result.arms) o << " " << cell(task_arm_name(a)) << " |";
  o << "\n|---|";
  for (size_t i = 0; i < result.arms.size(); ++i) o << "---:|";
  o << "\n";
  for (size_t c = 0; c < suite.cases.size(); ++c) {
    o << "| " << cell(suite.cases[c].name) << " |";
    for (const TaskArmResult& a : result.arms) {
      int64_t pass = 0, runs = 0, flips = 0;
      for (const CaseRun& r : a.runs) {
        if (r.case_index != c) continue;
        ++runs;
        pass += r.pass;
        flips += r.flip;
      }
      o << " " << pass << "/" << runs;
      if (flips) o << " (" << flips << ")";
      o << " |";
    }
    o << "\n";
  }
  return o.str();
}

std::string tasks_svg(const ReportHeader& header, const TaskResult& result) {
  BarChart chart;
  chart.title = "keel eval tools: " + model_name(header.model) + " (" + header.weight_format + ")";
  chart.left_label = "tool-call pass rate %";
  chart.right_label = "KV bytes/token";
  for (const TaskArmResult& a : result.arms)
    chart.groups.push_back({a.arm.label + (a.reuse ? " +reuse" : " fresh"), 100 * a.pass_rate(), a.kv_bytes_per_token});
  return render_svg(chart);
}

}  // namespace keel::eval
