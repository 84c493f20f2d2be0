#pragma once
// A grouped bar chart as standalone SVG text: per group (a KV arm) one bar on a left axis (a
// rate in percent, e.g. tool-call pass rate) and one on a right axis (e.g. KV bytes per token).
// Written by hand so the reports need no plotting library; the text is valid XML (labels escaped).
#include <string>
#include <vector>

namespace keel::eval {

struct ChartGroup {
  std::string label;
  double left = 0;   // 0..100 (percent)
  double right = 0;  // >= 0
};

struct BarChart {
  std::string title;
  std::string left_label;   // e.g. "pass rate %"
  std::string right_label;  // e.g. "KV bytes/token"
  std::vector<ChartGroup> groups;
};

std::string render_svg(const BarChart& chart);
std::string xml_escape(const std::string& text);

}  // namespace keel::eval
