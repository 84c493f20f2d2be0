#pragma once
// Charts as standalone SVG text. A grouped bar chart: per group (a KV arm) one bar on a left axis (a
// rate in percent, e.g. tool-call pass rate) and one on a right axis (e.g. KV bytes per token).
// Written by hand so the reports need no plotting library; the text is valid XML (labels escaped).
//
// Threads: plain values and pure functions: any thread.
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

// Points (one per KV arm) on two linear axes, e.g. KV bytes/token against flips per 10k
// positions; each series has its own marker colour, each point its label.
struct ScatterPoint {
  std::string label;
  double x = 0;  // >= 0
  double y = 0;  // >= 0
};
struct ScatterSeries {
  std::string name;
  std::vector<ScatterPoint> points;
};
struct ScatterChart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<ScatterSeries> series;
};

std::string render_scatter_svg(const ScatterChart& chart);
std::string xml_escape(const std::string& text);

}  // namespace keel::eval
