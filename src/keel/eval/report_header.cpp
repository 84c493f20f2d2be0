#include "keel/eval/report_header.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <set>
#include <sstream>
#include <thread>

#include "keel/kv/kv_format.h"
#include "keel/ops/simd_kernels.h"

namespace keel::eval {

MachineInfo describe_machine() {
  MachineInfo m;
  m.cpu_model = "unknown";
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) m.cpu_model = line.substr(line.find_first_not_of(" \t", colon + 1));
    break;
  }
  m.cores = static_cast<int>(std::thread::hardware_concurrency());
  m.simd_target = ops::simd_target_name();
  return m;
}

PromptLengths summarize_lengths(const std::vector<int64_t>& lengths) {
  PromptLengths p;
  if (lengths.empty()) return p;
  p.count = static_cast<int64_t>(lengths.size());
  p.min = *std::min_element(lengths.begin(), lengths.end());
  p.max = *std::max_element(lengths.begin(), lengths.end());
  p.mean = static_cast<double>(std::accumulate(lengths.begin(), lengths.end(), int64_t{0})) / static_cast<double>(p.count);
  return p;
}

std::string policy_formats(const kv::KvPolicy& policy, bool rotate) {
  std::set<KvFormat> formats = {policy.default_format()};
  for (size_t r = 0; r < chat::kRoleCount; ++r) formats.insert(policy.role_format(static_cast<chat::Role>(r)));
  std::string out;
  for (KvFormat f : kAllKvFormats) {
    if (!formats.count(f)) continue;
    if (!out.empty()) out += ", ";
    out += kv_format_name(f);
    if (rotate && kv::rotated_by_default(f)) out += " (rotated)";
  }
  return out;
}

std::string markdown_cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

nlohmann::ordered_json header_json(const ReportHeader& h) {
  nlohmann::ordered_json policies = nlohmann::ordered_json::array();
  for (const PolicyArm& a : h.policies)
    policies.push_back({{"label", a.label}, {"spec", a.policy.describe()}, {"formats", policy_formats(a.policy, h.rotate)}});
  nlohmann::ordered_json j = {{"mode", h.mode},
                              {"model", h.model},
                              {"weight_format", h.weight_format}};
  if (!h.baseline_model.empty()) {
    j["baseline_model"] = h.baseline_model;
    j["baseline_weight_format"] = h.baseline_weight_format;
  }
  j["data"] = h.data;
  j["kv_policies"] = policies;
  j["rotation"] = h.rotate;
  j["prompt_tokens"] = {{"count", h.prompts.count}, {"min", h.prompts.min}, {"mean", h.prompts.mean}, {"max", h.prompts.max}};
  j["runs"] = h.runs;
  j["seeds"] = h.seeds;
  j["temperature"] = h.temperature;
  if (!h.reuse.empty()) j["reuse"] = h.reuse;
  if (!h.constrained.empty()) j["constrained_tool_calls"] = h.constrained;
  j["keel_version"] = h.keel_version;
  j["machine"] = {{"cpu", h.machine.cpu_model}, {"cores", h.machine.cores}, {"simd_target", h.machine.simd_target}};
  j["command"] = h.command;
  return j;
}

std::string header_markdown(const ReportHeader& h) {
  std::ostringstream o;
  o << "| | |\n|---|---|\n";
  o << "| model | `" << markdown_cell(h.model) << "` (" << h.weight_format << " weights) |\n";
  if (!h.baseline_model.empty())
    o << "| reference | `" << markdown_cell(h.baseline_model) << "` (" << h.baseline_weight_format << " weights, bf16 KV) |\n";
  o << "| data | `" << markdown_cell(h.data) << "` |\n";
  o << "| KV policies |";
  for (size_t i = 0; i < h.policies.size(); ++i)
    o << (i ? "<br>" : " ") << "**" << markdown_cell(h.policies[i].label) << "**: `" << h.policies[i].policy.describe() << "` ("
      << policy_formats(h.policies[i].policy, h.rotate) << ")";
  o << " |\n";
  o << "| rotation | " << (h.rotate ? "on (Walsh-Hadamard below 8 bits)" : "off") << " |\n";
  char lengths[160];
  std::snprintf(lengths, sizeof lengths, "%lld prompts, %lld to %lld tokens (mean %.0f)",
                static_cast<long long>(h.prompts.count), static_cast<long long>(h.prompts.min),
                static_cast<long long>(h.prompts.max), h.prompts.mean);
  o << "| prompt lengths | " << lengths << " |\n";
  o << "| runs | " << h.runs << " |\n";
  o << "| seeds |";
  for (size_t i = 0; i < h.seeds.size(); ++i) o << (i ? ", " : " ") << h.seeds[i];
  if (h.seeds.empty()) o << " none (teacher-forced, deterministic)";
  o << " |\n";
  if (h.mode == "tools") o << "| sampling | temperature " << h.temperature << " |\n";
  if (!h.reuse.empty()) o << "| cache reuse | " << h.reuse << " |\n";
  if (!h.constrained.empty()) o << "| constrained tool calls | " << h.constrained << " |\n";
  o << "| keel | " << h.keel_version << " |\n";
  o << "| machine | " << markdown_cell(h.machine.cpu_model) << ", " << h.machine.cores << " threads, SIMD " << h.machine.simd_target
    << " |\n";
  if (!h.command.empty()) o << "| command | `" << markdown_cell(h.command) << "` |\n";
  return o.str();
}

}  // namespace keel::eval
