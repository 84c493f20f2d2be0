// Every numeric flag of every keel command, through the real binary, with values outside its
// documented range (docs/cli.md) and values that are not numbers: each must exit with status 1 and
// one line naming the flag, before anything loads. None may wrap (--port 70000 once bound 4464),
// overflow (--max-body-mb 17592186044416 once became 0), crash or hang.
#include <gtest/gtest.h>

#include <climits>
#include <set>
#include <sstream>

#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;

struct NumericFlag {
  std::string command;  // what follows `keel` before the flag: enough to reach the flag's check
  std::string flag;
  double min = 0, max = 0;
  bool integer = true;
  bool above_min = false;  // min itself is refused (sizes that must be positive)
};

std::string tiny() { return tiny_toolcaller_dir().string(); }

std::vector<NumericFlag> numeric_flags(const std::string& scratch) {
  const std::string serve = "serve --model " + tiny();
  const std::string run = "run --model " + tiny() + " --tokens 1";
  const std::string bench = "bench --model " + tiny() + " --no-limits";
  const std::string session = "bench --model " + tiny() + " --session 1";
  const std::string parallel = "bench --model " + tiny() + " --parallel 1";
  const std::string synth = "synth --config " + tiny() + "/config.json --out " + scratch + "/synth";
  const std::string plan = "plan " + tiny();
  const std::string tools = "eval tools --model " + tiny() + " --suite " + scratch + "/none.json";
  const std::string fidelity = "eval fidelity --model " + tiny() + " --transcripts " + scratch + "/none.jsonl";
  const double tokens = 1 << 24, gib = 1 << 20, seeds = static_cast<double>(LONG_MAX);
  return {
      {serve, "port", 0, 65535},
      {serve, "threads", 0, 1024},
      {serve, "context", 1, tokens},
      {serve, "tool-retries", 0, 32},
      {serve, "queue-depth", 1, 1024},
      {serve, "parallel", 1, 64},
      {serve, "max-body-mb", 1, 1024},
      {serve, "memory", 0, gib, false, true},
      {serve, "kv-memory", 0, gib, false, true},
      {serve + " --kv-disk " + scratch + "/kv-disk", "kv-disk-gb", 0, gib, false, true},
      {run, "max-tokens", 0, tokens},
      {run, "context", 1, tokens},
      {run, "prefill-chunk", 1, tokens},
      {run, "temperature", 0, 100, false},
      {run, "top-k", 0, INT32_MAX},
      {run, "top-p", 0, 1, false},
      {run, "min-p", 0, 1, false},
      {run, "seed", 0, seeds},
      {run, "threads", 0, 1024},
      {bench, "prompt-tokens", 1, tokens},
      {bench, "gen-tokens", 1, tokens},
      {bench, "repeats", 1, 1000},
      {bench, "kv-context", 1, tokens},
      {bench, "threads", 0, 1024},
      {bench, "session", 1, 100000},
      {session, "system-tokens", 0, tokens},
      {session, "answer-tokens", 1, tokens},
      {session, "threads", 0, 1024},
      {session + " --kv-disk " + scratch + "/kv-disk", "kv-disk-gb", 0, gib, false, true},
      {bench, "parallel", 1, 64},
      {parallel, "prompt-tokens", 1, tokens},
      {parallel, "gen-tokens", 1, tokens},
      {parallel, "long-prompt-tokens", 1, tokens},
      {parallel, "short-requests", 0, 1000},
      {parallel, "short-prompt-tokens", 1, tokens},
      {parallel, "short-gen-tokens", 1, tokens},
      {parallel, "short-interval-ms", 0, 3600000},
      {parallel, "threads", 0, 1024},
      {synth, "group-size", 32, 128},
      {synth, "seed", 0, seeds},
      {synth, "layers", 0, 100000},
      {plan, "context", 1, static_cast<double>(1L << 40)},
      {plan, "memory", 0, gib, false, true},
      {tools, "runs", 1, 1000},
      {tools, "seed", 0, seeds},
      {tools, "temperature", 0, 100, false},
      {tools, "max-tokens", 1, tokens},
      {tools, "threads", 0, 1024},
      {fidelity, "chunk", 1, tokens},
  };
}

std::string number_text(double x, bool integer) {
  if (integer) return std::to_string(static_cast<long long>(x));
  std::ostringstream out;
  out.precision(17);
  out << x;
  return out.str();
}

// 0, -1, just outside each end, huge, overflowing and non-numeric values, where the range refuses them.
std::set<std::string> bad_values(const NumericFlag& f) {
  std::set<std::string> out = {"abc", "12x", "", " 5", "0x10", "99999999999999999999999999",
                               "-99999999999999999999999999", "nan", "inf"};
  if (f.integer) out.insert({"1.5", "1e3"});
  else out.insert({"-inf", "1e999", "-1e999"});
  if (f.min >= 0) out.insert("-1");
  if (f.min > 0 || f.above_min) out.insert("0");
  if (f.integer && f.min > 0) out.insert(number_text(f.min - 1, true));
  if (f.max < 1e18) {
    out.insert(number_text(f.integer ? f.max + 1 : f.max * 2, f.integer));
    if (f.max < 17592186044416.0) out.insert("17592186044416");
  }
  return out;
}

std::string one_line(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

TEST(ReliabilityFlags, EveryNumericFlagRefusesValuesOutsideItsRangeWithOneLine) {
  TempDir scratch;
  int probes = 0;
  // The sanitized keel meets every bad value through the first whole-number and the first
  // fractional flag of each command, so its parsers run under ASan and UBSan; the other probes,
  // which check that each flag is validated, run the unsanitized build when the suite has one
  // (ASan's start-up is 0.3 s a process, 20 times the release build's, and there are 300-odd).
  std::set<std::pair<std::string, bool>> sanitized_kinds;
  for (const NumericFlag& f : numeric_flags(scratch.path().string())) {
    const std::string name = f.command.substr(0, f.command.find(' '));
    const bool sanitized = release_binary().empty() || sanitized_kinds.insert({name, f.integer}).second;
    const std::string binary = (sanitized ? keel_binary() : release_binary()).string();
    for (const std::string& value : bad_values(f)) {
      ++probes;
      // `timeout` turns a hang into a failure (status 124) instead of a stuck test.
      const CommandResult r = run_command("timeout 60 " + binary + " " + f.command + " '--" + f.flag + "=" + value + "'");
      const std::string what = "keel " + f.command.substr(0, f.command.find(" --")) + " --" + f.flag + "='" + value + "'";
      EXPECT_EQ(r.exit_code, 1) << what << "\n" << r.output;
      const std::string line = one_line(r.output);
      EXPECT_EQ(line.find('\n'), std::string::npos) << what << ": more than one line\n" << r.output;
      EXPECT_TRUE(line.starts_with("keel " + name + ": error: ")) << what << "\n" << r.output;
      EXPECT_NE(line.find("--" + f.flag), std::string::npos) << what << ": the message does not name the flag\n" << r.output;
    }
  }
  EXPECT_GT(probes, 300);
  EXPECT_FALSE(std::filesystem::exists(scratch.path() / "synth"));  // refused before writing anything
}

// The values of the issue report, with the whole message a user sees.
TEST(ReliabilityFlags, ServeNamesTheFlagAndItsRange) {
  const std::string serve = keel_binary().string() + " serve --model " + tiny();
  const struct {
    std::string args, message;
  } cases[] = {
      {"--port 70000", "--port: '70000' is out of range (expected a whole number from 0 to 65535)"},
      {"--max-body-mb 17592186044416",
       "--max-body-mb: '17592186044416' is out of range (expected a whole number from 1 to 1024)"},
      {"--tool-retries 1000000", "--tool-retries: '1000000' is out of range (expected a whole number from 0 to 32)"},
      {"--queue-depth 100000", "--queue-depth: '100000' is out of range (expected a whole number from 1 to 1024)"},
      {"--port 4000x", "--port: '4000x' is not a whole number (expected a whole number from 0 to 65535)"},
      {"--memory nan", "--memory: 'nan' is not a number (expected a number above 0 and at most 1048576)"},
      {"--kv-memory 0", "--kv-memory: '0' is out of range (expected a number above 0 and at most 1048576)"},
  };
  for (const auto& c : cases) {
    const CommandResult r = run_command("timeout 60 " + serve + " " + c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.output;
    EXPECT_EQ(r.output, "keel serve: error: " + c.message + "\n") << c.args;
  }
  // The environment goes through the same check.
  const CommandResult env = run_command("KEEL_PORT=70000 timeout 60 " + serve);
  EXPECT_EQ(env.exit_code, 1) << env.output;
  EXPECT_NE(env.output.find("--port: '70000' is out of range"), std::string::npos) << env.output;
}

// The top of each range is a value the server runs with.
TEST(ReliabilityFlags, ServeRunsAtTheTopOfEachRange) {
  ServerProcess server({"--queue-depth", "1024", "--tool-retries", "32", "--max-body-mb", "1024", "--threads", "1"});
  auto client = server.client();
  auto health = client.Get("/health");
  ASSERT_TRUE(health);
  const json h = json::parse(health->body);
  EXPECT_EQ(h["queue"]["max_waiting"], 1024) << health->body;
  const auto r = post_json(client, "/v1/messages",
                           {{"model", "tiny-toolcaller"}, {"max_tokens", 4},
                            {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}});
  EXPECT_EQ(r.status, 200) << r.text;
}

// keel run's sampler takes the API's range for --top-p: 0 keeps only the most likely token, so it
// writes the greedy continuation whatever the temperature and seed.
TEST(ReliabilityFlags, RunTopPZeroIsGreedy) {
  const std::string run = keel_binary().string() + " run --model " + tiny() + " --tokens 1657,882,198 --ids --max-tokens 12";
  const CommandResult greedy = run_command(run + " --temperature 0", false);
  ASSERT_EQ(greedy.exit_code, 0) << greedy.output;
  ASSERT_FALSE(greedy.output.empty());
  bool sampling_differs = false;  // so that agreeing says something about top_p
  for (int seed : {1, 2, 3, 4}) {
    const std::string sampled = run + " --temperature 1.5 --seed " + std::to_string(seed);
    const CommandResult cut = run_command(sampled + " --top-p 0", false);
    EXPECT_EQ(cut.exit_code, 0) << cut.output;
    EXPECT_EQ(cut.output, greedy.output) << "seed " << seed;
    sampling_differs |= run_command(sampled, false).output != greedy.output;
  }
  EXPECT_TRUE(sampling_differs) << "temperature 1.5 gave the greedy answer for every seed: the check above proves nothing";
}

}  // namespace
}  // namespace keel::test
