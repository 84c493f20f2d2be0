#pragma once
// The reports of both eval modes: Markdown for people, JSON for scripts, and an SVG chart
// (left axis: pass rate or top-1 agreement in percent; right axis: KV bytes per token).
//
// Threads: pure functions of their arguments: any thread.
#include <string>

#include <nlohmann/json.hpp>

#include "keel/eval/fidelity.h"
#include "keel/eval/report_header.h"
#include "keel/eval/task_runner.h"

namespace keel::eval {

nlohmann::ordered_json fidelity_json(const ReportHeader& header, const FidelityResult& result);
std::string fidelity_markdown(const ReportHeader& header, const FidelityResult& result);
std::string fidelity_svg(const ReportHeader& header, const FidelityResult& result);

nlohmann::ordered_json tasks_json(const ReportHeader& header, const TaskSuite& suite, const TaskResult& result);
std::string tasks_markdown(const ReportHeader& header, const TaskSuite& suite, const TaskResult& result);
std::string tasks_svg(const ReportHeader& header, const TaskResult& result);

// "int8 reuse on" / "int8 reuse off": the name of a task arm in tables and charts.
std::string task_arm_name(const TaskArmResult& arm);

}  // namespace keel::eval
