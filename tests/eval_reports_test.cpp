// keel eval reports: JSON that parses back, Markdown tables with even rows, SVG that is well-formed XML.
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>
#include <vector>

#include "keel/eval/reports.h"
#include "keel/eval/svg_chart.h"

namespace keel::eval {
namespace {

using json = nlohmann::ordered_json;

// A small XML well-formedness check: tags nest and close in order, attributes are quoted, and
// text holds no raw '<' or unescaped '&'.
::testing::AssertionResult well_formed_xml(const std::string& xml) {
  std::vector<std::string> open;
  size_t i = 0;
  while (i < xml.size()) {
    if (xml[i] == '&') {
      bool known = false;
      for (const char* e : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"})
        if (xml.compare(i, std::strlen(e), e) == 0) {
          i += std::strlen(e);
          known = true;
          break;
        }
      if (!known) return ::testing::AssertionFailure() << "bare & at " << i;
      continue;
    }
    if (xml[i] != '<') {
      ++i;
      continue;
    }
    const size_t end = xml.find('>', i);
    if (end == std::string::npos) return ::testing::AssertionFailure() << "unclosed tag at " << i;
    std::string tag = xml.substr(i + 1, end - i - 1);
    if (tag.find('<') != std::string::npos) return ::testing::AssertionFailure() << "'<' inside tag at " << i;
    size_t quotes = 0;
    for (char c : tag) quotes += c == '"';
    if (quotes % 2) return ::testing::AssertionFailure() << "unbalanced quotes in <" << tag << ">";
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name)
        return ::testing::AssertionFailure() << "</" << name << "> closes " << (open.empty() ? "nothing" : open.back());
      open.pop_back();
    } else if (tag.back() != '/') {
      open.push_back(tag.substr(0, tag.find_first_of(" \n")));
    }
    i = end + 1;
  }
  if (!open.empty()) return ::testing::AssertionFailure() << "<" << open.back() << "> never closed";
  return ::testing::AssertionSuccess();
}

// Every table row of a Markdown text has as many cells as its header.
::testing::AssertionResult even_tables(const std::string& md) {
  std::istringstream in(md);
  std::string line;
  int columns = -1;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '|') {
      columns = -1;
      continue;
    }
    int pipes = 0;
    for (size_t k = 0; k < line.size(); ++k)
      if (line[k] == '|' && (k == 0 || line[k - 1] != '\\')) ++pipes;
    if (columns < 0) columns = pipes;
    else if (pipes != columns) return ::testing::AssertionFailure() << "row has " << pipes << " pipes, header " << columns << ": " << line;
  }
  return ::testing::AssertionSuccess();
}

ReportHeader header(const char* mode) {
  ReportHeader h;
  h.mode = mode;
  h.model = "models/tiny-toolcaller";
  h.weight_format = "bf16";
  h.data = "x.jsonl";
  h.policies = {full_arm(), PolicyArm{"a<b & \"c\"", kv::KvPolicy::parse("default=int2")}};
  h.prompts = summarize_lengths({100, 300});
  h.runs = 3;
  h.seeds = {1, 2, 3};
  h.machine = describe_machine();
  h.command = "keel eval x | y";
  return h;
}

FidelityResult fidelity_result() {
  FidelityResult r;
  r.prompt_lengths = {100, 300};
  for (const PolicyArm& a : header("fidelity").policies) {
    ArmFidelity f{a, 512.0, {}, {}};
    f.overall.add({0.25, false});
    f.overall.add({0.0, true});
    f.by_group[static_cast<size_t>(RoleGroup::tool_call)].add({0.25, false});
    f.by_distance[0].add({0.25, false});
    f.by_distance[0].add({0.0, true});
    f.tool_call_by_distance[0].add({0.25, false});
    r.arms.push_back(f);
  }
  return r;
}

TEST(EvalReports, FidelityReportsAreWellFormed) {
  const ReportHeader h = header("fidelity");
  const FidelityResult r = fidelity_result();
  const json j = json::parse(fidelity_json(h, r).dump());
  EXPECT_EQ(j["header"]["model"], "models/tiny-toolcaller");
  EXPECT_EQ(j["header"]["keel_version"], KEEL_VERSION);
  EXPECT_EQ(j["header"]["prompt_tokens"]["max"], 300);
  EXPECT_EQ(j["header"]["kv_policies"][1]["formats"], "int2 (rotated)");
  EXPECT_FALSE(j["header"]["machine"]["simd_target"].get<std::string>().empty());
  EXPECT_EQ(j["arms"][1]["overall"]["flips"], 1);
  EXPECT_DOUBLE_EQ(j["arms"][1]["overall"]["flips_per_10k"].get<double>(), 5000.0);
  EXPECT_EQ(j["arms"][0]["by_role"]["tool_call"]["positions"], 1);
  const std::string md = fidelity_markdown(h, r);
  EXPECT_TRUE(even_tables(md));
  EXPECT_NE(md.find("| tool_call | 1 |"), std::string::npos);
  EXPECT_NE(md.find("## By distance of the predicted token"), std::string::npos);
  EXPECT_EQ(j["arms"][1]["by_distance_from_end"]["0-255"]["positions"], 2);
  EXPECT_EQ(j["arms"][1]["tool_call_by_distance_from_end"]["0-255"]["flips"], 1);
  const std::string svg = fidelity_svg(h, r);
  EXPECT_TRUE(well_formed_xml(svg));
  EXPECT_NE(svg.find("a&lt;b &amp; &quot;c&quot;"), std::string::npos);
  // Bytes/token against flips: one point per arm for all positions and one for tool calls.
  size_t circles = 0;
  for (size_t at = svg.find("<circle"); at != std::string::npos; at = svg.find("<circle", at + 1)) ++circles;
  EXPECT_EQ(circles, 2 * r.arms.size() + 2);  // + the two legend markers
  EXPECT_NE(svg.find("tool_call positions"), std::string::npos);
  EXPECT_NE(svg.find("KV bytes/token"), std::string::npos);
  EXPECT_TRUE(well_formed_xml(render_scatter_svg(ScatterChart{"t", "x", "y", {}})));
}

TEST(EvalReports, TaskReportsAreWellFormed) {
  TaskSuite suite;
  suite.name = "mini";
  suite.cases.resize(2);
  suite.cases[0].name = "ls | wc";
  suite.cases[1].name = "read";
  TaskResult r;
  r.prompt_lengths = {100, 300};
  r.run_seeds = {1};
  for (bool reuse : {true, false}) {
    TaskArmResult a;
    a.arm = full_arm();
    a.reuse = reuse;
    a.kv_bytes_per_token = 8192;
    CaseRun pass;
    pass.case_index = 0;
    pass.called = true;
    pass.call = {"Bash", {{"command", "ls"}}};
    pass.pass = true;
    CaseRun fail;
    fail.case_index = 1;
    fail.reason = "no tool call";
    fail.flip = !reuse;
    a.runs = {pass, fail};
    r.arms.push_back(a);
  }
  const ReportHeader h = header("tools");
  const json j = json::parse(tasks_json(h, suite, r).dump());
  EXPECT_EQ(j["arms"][0]["passes"], 1);
  EXPECT_DOUBLE_EQ(j["arms"][0]["pass_rate"].get<double>(), 0.5);
  EXPECT_EQ(j["arms"][1]["flips_vs_full"], 1);
  EXPECT_EQ(j["arms"][0]["runs"][0]["call"]["name"], "Bash");
  EXPECT_EQ(j["arms"][0]["runs"][1]["reason"], "no tool call");
  const std::string md = tasks_markdown(h, suite, r);
  EXPECT_TRUE(even_tables(md)) << md;
  EXPECT_NE(md.find("| 1/2 | 50.0 %"), std::string::npos) << md;
  const std::string svg = tasks_svg(h, r);
  EXPECT_TRUE(well_formed_xml(svg));
  EXPECT_NE(svg.find("full +reuse"), std::string::npos);
}

TEST(EvalReports, SvgCheckerCatchesBrokenXml) {
  EXPECT_FALSE(well_formed_xml("<svg><g></svg></g>"));
  EXPECT_FALSE(well_formed_xml("<svg>a & b</svg>"));
  EXPECT_FALSE(well_formed_xml("<svg>"));
  EXPECT_TRUE(well_formed_xml(render_svg(BarChart{"t", "l", "r", {}})));
}

}  // namespace
}  // namespace keel::eval
