// keel bench --session N: the serving path under a Claude Code-shaped conversation. A system
// prompt of --system-tokens tokens plus tool schemas, then N turns, each adding a user message and
// the model's answer to the history. Reports, per turn, the prompt tokens prefilled versus reused
// and the time to first token: with the prefix cache only the new tokens should be prefilled.
// With --kv-disk the pool has a disk tier: run it twice with the same folder and the second run's
// turn 1 reads the system prompt back instead of prefilling it (a restart of keel serve).
#include <chrono>
#include <cstdio>

#include "bench_session.h"
#include "keel/engine/chat_turn.h"
#include "keel/engine/served_model.h"
#include "keel/engine/session_cache.h"
#include "keel/kv/kv_footprint.h"
#include "keel/util/error.h"

namespace keel::cli {
namespace {

using json = nlohmann::ordered_json;

json coding_tools() {
  auto tool = [](const char* name, const char* description, json properties, json required) {
    return json{{"type", "function"},
                {"function",
                 {{"name", name},
                  {"description", description},
                  {"parameters", {{"type", "object"}, {"properties", properties}, {"required", required}}}}}};
  };
  return json::array(
      {tool("Bash", "Run a shell command and return its output.", {{"command", {{"type", "string"}}}}, {"command"}),
       tool("Read", "Read a file.", {{"file_path", {{"type", "string"}}}}, {"file_path"}),
       tool("Edit", "Replace text in a file.",
            {{"file_path", {{"type", "string"}}}, {"old_string", {{"type", "string"}}}, {"new_string", {{"type", "string"}}}},
            {"file_path", "old_string", "new_string"})});
}

std::string system_prompt(const ServedModel& model, int64_t target_tokens) {
  const std::string paragraph =
      "\n\nGuideline: read files before editing them, keep changes small, run the tests after every change, "
      "and say what you did in one sentence. Never invent file names; list the directory first.";
  std::string system = "You are a coding assistant working in a large C++ repository.";
  const auto count = [&](const std::string& s) {
    return static_cast<int64_t>(model.tokenizer().encode(s).size());
  };
  const int64_t per = std::max<int64_t>(1, count(paragraph));
  for (int64_t n = count(system); n < target_tokens; n += per) system += paragraph;
  return system;
}

}  // namespace

void bench_session(const arch::ModelSource& source, int threads, int turns, int64_t system_tokens,
                   int64_t answer_tokens, const kv::KvPolicy& policy, const kv::KvDiskOptions& disk) {
  ServedModelOptions o;
  o.threads = threads;
  ServedModel model(source, o);
  const int64_t context = system_tokens + static_cast<int64_t>(turns) * (answer_tokens + 64) + 1024;
  const auto budget = static_cast<int64_t>(kv::kv_bytes_per_token(model.weights().spec, kv::KvPolicy(), context) *
                                           static_cast<double>(context)) * 2;
  SessionCache session(model.weights().spec, budget, policy, true, context, 1, disk);
  if (disk.enabled()) {
    const kv::KvDiskStats d = session.stats().disk;
    std::printf("KV disk tier     %s: %lld block files (%.1f MiB) found, cap %.1f GiB\n", disk.dir.c_str(),
                static_cast<long long>(d.files), static_cast<double>(d.bytes) / (1 << 20),
                static_cast<double>(d.cap_bytes) / (1 << 30));
  }

  json messages = json::array({{{"role", "system"}, {"content", system_prompt(model, system_tokens)}}});
  const json tools = coding_tools();
  std::printf("session          %d turns, system prompt + tools, %lld answer tokens per turn, KV %s\n", turns,
              static_cast<long long>(answer_tokens), policy.describe().c_str());
  std::printf("%-6s %10s %10s %10s %12s\n", "turn", "prompt", "reused", "prefilled", "first token");
  for (int turn = 1; turn <= turns; ++turn) {
    messages.push_back({{"role", "user"}, {"content", "Step " + std::to_string(turn) + ": list the files in src/ and fix the failing test."}});
    const PreparedPrompt prompt = model.prepare(messages, tools, false);
    TurnOptions t;
    t.max_tokens = answer_tokens;
    t.tools = tools;
    std::string answer;
    const TurnResult r = run_turn(model, session, prompt, t, [&](TurnEvent&& e) {
      if (e.kind == TurnEvent::Kind::Text) answer += e.text;
    });
    const auto& st = r.stats;
    std::printf("%-6d %10lld %10lld %10lld %10.1f ms\n", turn, static_cast<long long>(st.prompt_tokens),
                static_cast<long long>(st.reused_tokens), static_cast<long long>(st.prompt_tokens - st.reused_tokens),
                st.first_token_seconds * 1e3);
    messages.push_back({{"role", "assistant"}, {"content", answer.empty() ? std::string("ok") : answer}});
  }
  if (disk.enabled()) {
    const kv::KvPoolStats s = session.stats();
    std::printf("KV disk tier     %lld blocks read back (%.1f MiB), %lld corrupt, %lld mismatched; %lld files written "
                "so far, %lld queued (written before exit)\n",
                static_cast<long long>(s.disk_reused_blocks), static_cast<double>(s.disk.hit_bytes) / (1 << 20),
                static_cast<long long>(s.disk.corrupt), static_cast<long long>(s.disk.mismatched),
                static_cast<long long>(s.disk.writes), static_cast<long long>(s.disk.pending));
  }
}

}  // namespace keel::cli
