#pragma once
// What every eval report states before its numbers, so that a reader can tell what was measured
// and repeat it: model, weight format, KV policies and the formats they use, rotation, prompt
// lengths, runs and seeds, keel version, machine.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "keel/eval/policy_arms.h"

namespace keel::eval {

struct MachineInfo {
  std::string cpu_model;  // /proc/cpuinfo "model name" (or "unknown")
  int cores = 0;          // hardware threads
  std::string simd_target;
};

MachineInfo describe_machine();

struct PromptLengths {
  int64_t count = 0, min = 0, max = 0;
  double mean = 0;
};
PromptLengths summarize_lengths(const std::vector<int64_t>& lengths);

struct ReportHeader {
  std::string mode;  // "fidelity" or "tools"
  std::string model;
  std::string weight_format;
  std::string baseline_model;  // fidelity --weights-baseline, else empty
  std::string baseline_weight_format;
  std::string data;  // transcripts or suite file
  std::vector<PolicyArm> policies;
  bool rotate = true;
  PromptLengths prompts;
  int runs = 1;
  std::vector<uint64_t> seeds;
  double temperature = 0;
  std::string reuse;  // tools: on, off or both
  std::string constrained;  // tools: "on" when calls were decoded under their schemas' grammars, else "off"
  std::string keel_version = KEEL_VERSION;
  MachineInfo machine;
  std::string command;  // the command line that produced the report
};

// "bf16", "int8", "int4 (rotated)" ... the formats a policy can store.
std::string policy_formats(const kv::KvPolicy& policy, bool rotate);

// Text for one Markdown table cell: '|' escaped, newlines flattened.
std::string markdown_cell(const std::string& text);

nlohmann::ordered_json header_json(const ReportHeader& h);
std::string header_markdown(const ReportHeader& h);

}  // namespace keel::eval
