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

}  // namespace keel::eval
