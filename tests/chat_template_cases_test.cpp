// Invariant 2: every case in fixtures/chat_template_cases renders byte-identical to `expected`,
// or fails where the case has `error`. Prints `templates: N/M cases identical`; set
// KEEL_TEMPLATE_DIFFS=1 to see each mismatch.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "keel/chat/chat_renderer.h"
#include "keel/chat/jinja_template.h"
#include "keel/util/error.h"
#include "test_support.h"

namespace {

// Cases that match today. Raise it when more cases pass; the test fails if the count drops.
constexpr int kIdenticalFloor = 558;  // all 558 cases of the 62 fixture files

// The fixtures were rendered with strftime_now fixed at 2026-03-14 09:26:53.
std::tm fixture_clock() { return keel::test::utc_time(2026, 3, 14, 9, 26, 53); }

std::string first_difference(const std::string& got, const std::string& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  size_t from = i > 80 ? i - 80 : 0;
  return "at byte " + std::to_string(i) + "\n  got:  ..." + nlohmann::json(got.substr(from, 200)).dump() +
         "\n  want: ..." + nlohmann::json(want.substr(from, 200)).dump();
}

}  // namespace

TEST(ChatTemplateCases, RenderLikeTransformers) {
  namespace fs = std::filesystem;
  fs::path dir = keel::test::shared_dir() / "fixtures/chat_template_cases";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());

  bool show = std::getenv("KEEL_TEMPLATE_DIFFS") != nullptr;
  keel::jinja::RenderOptions options;
  options.now = fixture_clock;
  int identical = 0, total = 0;
  for (const auto& file : files) {
    auto doc = nlohmann::ordered_json::parse(keel::test::read_text(file));
    std::string source = keel::test::read_text(dir.parent_path() / doc["template"].get<std::string>());
    std::unique_ptr<keel::jinja::Template> tmpl;
    std::string parse_error;
    try {
      tmpl = std::make_unique<keel::jinja::Template>(source);
    } catch (const keel::Error& e) {
      parse_error = e.what();
    }
    for (const auto& c : doc["cases"]) {
      ++total;
      std::string name = file.stem().string() + "/" + c["name"].get<std::string>();
      bool want_error = c.contains("error");
      std::string got, error = parse_error;
      if (tmpl) {
        keel::jinja::DictData context;
        for (const auto& [k, v] : c["context"].items()) context.set(k, keel::jinja::value_from_json(v));
        try {
          got = tmpl->render(context, options).text();
        } catch (const keel::Error& e) {
          error = e.what();
        }
      }
      bool ok = want_error ? !error.empty() : error.empty() && got == c["expected"].get<std::string>();
      if (ok) {
        ++identical;
      } else if (show) {
        if (!error.empty()) std::printf("MISMATCH %s: error %s\n", name.c_str(), error.c_str());
        else if (want_error) std::printf("MISMATCH %s: rendered, expected error %s\n", name.c_str(), c["error"].get<std::string>().c_str());
        else std::printf("MISMATCH %s: %s\n", name.c_str(), first_difference(got, c["expected"].get<std::string>()).c_str());
      }
    }
  }
  std::printf("templates: %d/%d cases identical\n", identical, total);
  EXPECT_GE(identical, kIdenticalFloor);
}

// The renderer tags every message field with its role before rendering; tags must never change the
// text, and the spans must tile it.
TEST(ChatTemplateCases, RoleTaggingLeavesTextUnchanged) {
  namespace fs = std::filesystem;
  fs::path dir = keel::test::shared_dir() / "fixtures/chat_template_cases";
  keel::chat::ChatRenderOptions options;
  options.jinja.now = fixture_clock;
  options.parse_string_arguments = false;
  options.absent_as_none = false;
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    auto doc = nlohmann::ordered_json::parse(keel::test::read_text(entry.path()));
    std::string source = keel::test::read_text(dir.parent_path() / doc["template"].get<std::string>());
    keel::chat::ChatTemplate tmpl(source);
    for (const auto& c : doc["cases"]) {
      if (c.contains("error")) continue;
      const auto& ctx = c["context"];
      nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
      for (const auto& [k, v] : ctx.items())
        if (k != "messages" && k != "tools") kwargs[k] = v;
      auto prompt = tmpl.render(ctx["messages"], ctx.contains("tools") ? ctx["tools"] : nlohmann::ordered_json(), kwargs, options);
      std::string name = entry.path().stem().string() + "/" + c["name"].get<std::string>();
      EXPECT_EQ(prompt.text, c["expected"].get<std::string>()) << name;
      size_t pos = 0;
      for (const auto& s : prompt.spans) {
        EXPECT_EQ(s.begin, pos) << name;
        pos = s.end;
      }
      EXPECT_EQ(pos, prompt.text.size()) << name;
      ++checked;
    }
  }
  EXPECT_GT(checked, 500);
}
