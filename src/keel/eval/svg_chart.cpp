#include "keel/eval/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace keel::eval {
namespace {

constexpr double kLeftMargin = 60, kRightMargin = 80, kTop = 50, kPlotHeight = 240, kBottom = 90;
constexpr double kGroupWidth = 110;
const char* const kLeftColor = "#2b6cb0";
const char* const kRightColor = "#dd8452";

std::string num(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// A round axis maximum at or above `v` (1, 2 or 5 times a power of ten).
double nice_ceiling(double v) {
  if (v <= 0) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= v) return m * p;
  return 10 * p;
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string render_svg(const BarChart& chart) {
  const double n = static_cast<double>(std::max<size_t>(chart.groups.size(), 1));
  const double plot_width = kGroupWidth * n;
  const double width = kLeftMargin + plot_width + kRightMargin;
  const double height = kTop + kPlotHeight + kBottom;
  double right_max = 0;
  for (const ChartGroup& g : chart.groups) right_max = std::max(right_max, g.right);
  right_max = nice_ceiling(right_max);
  const double base = kTop + kPlotHeight;

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(width, 0) << "\" height=\"" << num(height, 0)
    << "\" viewBox=\"0 0 " << num(width, 0) << " " << num(height, 0)
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o << "  <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "  <text x=\"" << num(width / 2, 1) << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">"
    << xml_escape(chart.title) << "</text>\n";
  // Grid and both axes' ticks: five steps each.
  for (int i = 0; i <= 5; ++i) {
    const double y = base - kPlotHeight * i / 5.0;
    o << "  <line x1=\"" << num(kLeftMargin, 1) << "\" y1=\"" << num(y, 1) << "\" x2=\"" << num(kLeftMargin + plot_width, 1)
      << "\" y2=\"" << num(y, 1) << "\" stroke=\"#dddddd\"/>\n";
    o << "  <text x=\"" << num(kLeftMargin - 6, 1) << "\" y=\"" << num(y + 4, 1) << "\" text-anchor=\"end\" fill=\""
      << kLeftColor << "\">" << num(20.0 * i, 0) << "</text>\n";
    o << "  <text x=\"" << num(kLeftMargin + plot_width + 6, 1) << "\" y=\"" << num(y + 4, 1) << "\" fill=\"" << kRightColor
      << "\">" << num(right_max * i / 5.0, right_max >= 50 ? 0 : 1) << "</text>\n";
  }
  o << "  <text transform=\"translate(16," << num(base - kPlotHeight / 2, 1) << ") rotate(-90)\" text-anchor=\"middle\" fill=\""
    << kLeftColor << "\">" << xml_escape(chart.left_label) << "</text>\n";
  o << "  <text transform=\"translate(" << num(width - 14, 1) << "," << num(base - kPlotHeight / 2, 1)
    << ") rotate(90)\" text-anchor=\"middle\" fill=\"" << kRightColor << "\">" << xml_escape(chart.right_label)
    << "</text>\n";
  for (size_t i = 0; i < chart.groups.size(); ++i) {
    const ChartGroup& g = chart.groups[i];
    const double x0 = kLeftMargin + kGroupWidth * static_cast<double>(i) + 15;
    const double bar = (kGroupWidth - 30) / 2;
    const double lh = kPlotHeight * std::clamp(g.left, 0.0, 100.0) / 100.0;
    const double rh = kPlotHeight * std::clamp(g.right / right_max, 0.0, 1.0);
    o << "  <rect x=\"" << num(x0, 1) << "\" y=\"" << num(base - lh, 1) << "\" width=\"" << num(bar, 1) << "\" height=\""
      << num(lh, 1) << "\" fill=\"" << kLeftColor << "\"><title>" << xml_escape(g.label + ": " + num(g.left, 1) + " %")
      << "</title></rect>\n";
    o << "  <text x=\"" << num(x0 + bar / 2, 1) << "\" y=\"" << num(base - lh - 4, 1) << "\" text-anchor=\"middle\" font-size=\"10\">"
      << num(g.left, 0) << "</text>\n";
    o << "  <rect x=\"" << num(x0 + bar, 1) << "\" y=\"" << num(base - rh, 1) << "\" width=\"" << num(bar, 1)
      << "\" height=\"" << num(rh, 1) << "\" fill=\"" << kRightColor << "\"><title>"
      << xml_escape(g.label + ": " + num(g.right, 0)) << "</title></rect>\n";
    o << "  <text x=\"" << num(x0 + bar * 1.5, 1) << "\" y=\"" << num(base - rh - 4, 1)
      << "\" text-anchor=\"middle\" font-size=\"10\">" << num(g.right, 0) << "</text>\n";
    o << "  <text x=\"" << num(x0 + bar, 1) << "\" y=\"" << num(base + 16, 1) << "\" text-anchor=\"middle\">"
      << xml_escape(g.label) << "</text>\n";
  }
  o << "  <line x1=\"" << num(kLeftMargin, 1) << "\" y1=\"" << num(base, 1) << "\" x2=\"" << num(kLeftMargin + plot_width, 1)
    << "\" y2=\"" << num(base, 1) << "\" stroke=\"black\"/>\n";
  // Legend.
  const double ly = base + 45;
  o << "  <rect x=\"" << num(kLeftMargin, 1) << "\" y=\"" << num(ly - 10, 1) << "\" width=\"12\" height=\"12\" fill=\""
    << kLeftColor << "\"/>\n";
  o << "  <text x=\"" << num(kLeftMargin + 18, 1) << "\" y=\"" << num(ly, 1) << "\">" << xml_escape(chart.left_label)
    << " (left axis)</text>\n";
  o << "  <rect x=\"" << num(kLeftMargin, 1) << "\" y=\"" << num(ly + 8, 1) << "\" width=\"12\" height=\"12\" fill=\""
    << kRightColor << "\"/>\n";
  o << "  <text x=\"" << num(kLeftMargin + 18, 1) << "\" y=\"" << num(ly + 18, 1) << "\">" << xml_escape(chart.right_label)
    << " (right axis)</text>\n";
  o << "</svg>\n";
  return o.str();
}

std::string render_scatter_svg(const ScatterChart& chart) {
  constexpr double left = 70, right = 30, top = 50, plot_w = 560, plot_h = 300, bottom = 70;
  const char* const colors[] = {"#2b6cb0", "#dd8452", "#55a868", "#c44e52"};
  const double width = left + plot_w + right;
  const double legend_rows = static_cast<double>(chart.series.size());
  const double height = top + plot_h + bottom + 16 * legend_rows;
  double x_max = 0, y_max = 0;
  for (const ScatterSeries& s : chart.series)
    for (const ScatterPoint& p : s.points) {
      x_max = std::max(x_max, p.x);
      y_max = std::max(y_max, p.y);
    }
  x_max = nice_ceiling(x_max);
  y_max = nice_ceiling(y_max);
  const double base = top + plot_h;
  auto px = [&](double x) { return left + plot_w * std::clamp(x / x_max, 0.0, 1.0); };
  auto py = [&](double y) { return base - plot_h * std::clamp(y / y_max, 0.0, 1.0); };

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(width, 0) << "\" height=\"" << num(height, 0)
    << "\" viewBox=\"0 0 " << num(width, 0) << " " << num(height, 0)
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o << "  <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "  <text x=\"" << num(width / 2, 1) << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">"
    << xml_escape(chart.title) << "</text>\n";
  for (int i = 0; i <= 5; ++i) {
    const double y = base - plot_h * i / 5.0, x = left + plot_w * i / 5.0;
    o << "  <line x1=\"" << num(left, 1) << "\" y1=\"" << num(y, 1) << "\" x2=\"" << num(left + plot_w, 1) << "\" y2=\""
      << num(y, 1) << "\" stroke=\"#dddddd\"/>\n";
    o << "  <text x=\"" << num(left - 6, 1) << "\" y=\"" << num(y + 4, 1) << "\" text-anchor=\"end\">"
      << num(y_max * i / 5.0, y_max >= 50 ? 0 : 1) << "</text>\n";
    o << "  <line x1=\"" << num(x, 1) << "\" y1=\"" << num(top, 1) << "\" x2=\"" << num(x, 1) << "\" y2=\"" << num(base, 1)
      << "\" stroke=\"#eeeeee\"/>\n";
    o << "  <text x=\"" << num(x, 1) << "\" y=\"" << num(base + 16, 1) << "\" text-anchor=\"middle\">"
      << num(x_max * i / 5.0, 0) << "</text>\n";
  }
  o << "  <line x1=\"" << num(left, 1) << "\" y1=\"" << num(base, 1) << "\" x2=\"" << num(left + plot_w, 1) << "\" y2=\""
    << num(base, 1) << "\" stroke=\"black\"/>\n";
  o << "  <line x1=\"" << num(left, 1) << "\" y1=\"" << num(top, 1) << "\" x2=\"" << num(left, 1) << "\" y2=\""
    << num(base, 1) << "\" stroke=\"black\"/>\n";
  o << "  <text x=\"" << num(left + plot_w / 2, 1) << "\" y=\"" << num(base + 36, 1) << "\" text-anchor=\"middle\">"
    << xml_escape(chart.x_label) << "</text>\n";
  o << "  <text transform=\"translate(18," << num(base - plot_h / 2, 1) << ") rotate(-90)\" text-anchor=\"middle\">"
    << xml_escape(chart.y_label) << "</text>\n";
  for (size_t si = 0; si < chart.series.size(); ++si) {
    const ScatterSeries& s = chart.series[si];
    const char* color = colors[si % std::size(colors)];
    for (size_t pi = 0; pi < s.points.size(); ++pi) {
      const ScatterPoint& p = s.points[pi];
      const double x = px(p.x), y = py(p.y);
      o << "  <circle cx=\"" << num(x, 1) << "\" cy=\"" << num(y, 1) << "\" r=\"5\" fill=\"" << color
        << "\" fill-opacity=\"0.8\"><title>" << xml_escape(s.name + ", " + p.label + ": " + num(p.x, 0) + " bytes/token, " +
                                                   num(p.y, 1)) << "</title></circle>\n";
      // Labels alternate above and below so arms at the same cost stay readable.
      const double dy = (pi + si) % 2 == 0 ? -8 : 16;
      o << "  <text x=\"" << num(x + 7, 1) << "\" y=\"" << num(y + dy, 1) << "\" font-size=\"10\" fill=\"" << color << "\">"
        << xml_escape(p.label) << "</text>\n";
    }
    const double ly = base + 56 + 16 * static_cast<double>(si);
    o << "  <circle cx=\"" << num(left + 6, 1) << "\" cy=\"" << num(ly - 4, 1) << "\" r=\"5\" fill=\"" << color << "\"/>\n";
    o << "  <text x=\"" << num(left + 18, 1) << "\" y=\"" << num(ly, 1) << "\">" << xml_escape(s.name) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace keel::eval
