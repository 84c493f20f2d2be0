// The real Claude Code CLI (npm @anthropic-ai/claude-code, the version pinned in
// tests/clients/package-lock.json, installed into <build>/clients by
// scripts/install-client-tests.sh) run headless against a real `keel serve`:
//
//   claude -p PROMPT --output-format stream-json --verbose             (turn 1)
//   claude -p PROMPT --continue --output-format stream-json --verbose  (turn 2, same session)
//
// with its default model, tools and system prompt, through a recording proxy
// (tests/clients/recording_proxy.cjs) that logs every request and answer. It checks:
//   (a) turn 1 ends with a `result` that is not an error;
//   (b) turn 2 reads turn 1's whole prompt from keel's prefix cache (usage.cache_read_input_tokens);
//   (c) the mid-conversation system message Claude Code puts at messages[1] is answered 200 with a
//       complete stream (and whether the mid-conversation-system beta header came with it);
//   (d) keel logged no 4xx/5xx and no generation error, and the proxy saw none.
// docs/claude-code.md describes what Claude Code sends. Skipped when npm/node are not installed.
//
// The model: Claude Code's prompt is ~24.5k tokens under tiny-toolcaller's 1,661-token vocabulary
// and ~11.7k under the real Qwen2.5 tokenizer, so the test serves a `keel synth` Qwen2 model
// (hidden 64, 1 layer, 4 heads, 2 KV heads: one layer halves the prefill of that prompt, the
// test's main cost) that carries the real Qwen2.5 tokenizer and chat template. Random weights
// never sample <|im_end|>, so every answer would run to max_tokens and Claude Code would end the
// turn with "API Error: Claude's response exceeded the N output token maximum". Four embedding
// directions are therefore set by hand (see write_hello_model): the model answers "Hello\u0301"
// (a decomposed "o\u0301", which Qwen2.5's NFC normalizer rewrites when turn 2 sends it back) and
// ends its turn, whatever the prompt. The project folder and the prompt carry decomposed file
// names too, as macOS writes them. The test checks the protocol, not the answer.
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "client_support.h"
#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::json;

constexpr int kContext = 32768;

uint16_t bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>(bits >> 16);  // exact for the values used here
}

// A Qwen2-architecture model folder for Claude Code: `keel synth` random weights, the real
// Qwen2.5 tokenizer.json / tokenizer_config.json (chat template included) from the shared
// fixtures, and an embedding with four hand-set directions u, v, w, z (dimensions 0-3), tied to
// the output head. Every token's embedding is u, except "\n" = 3v, "Hello" = 6v + 3w, the
// combining acute U+0301 = 30w + 30z and <|im_end|> = 80z; the final norm keeps only dimensions
// 0-3. The layers' random weights (scale 0.02) barely move the residual stream, so the last
// position's normed state is 8 times the direction of its own token's embedding, and the logits
// are that dotted with each embedding: after "\n" (the end of "<|im_start|>assistant\n") "Hello"
// scores 48, "\n" 24, every other token 0; after "Hello" the acute scores 107 against "Hello"'s
// 54; after the acute <|im_end|> scores 453 against its 339. The answer is always "Hello\u0301",
// then end of turn.
std::filesystem::path write_hello_model(const TempDir& tmp) {
  const auto cfg_dir = tmp.path() / "config";
  const auto dir = tmp.path() / "qwen25-hello";
  std::filesystem::create_directories(cfg_dir);
  const json config = {{"architectures", {"Qwen2ForCausalLM"}},
                       {"model_type", "qwen2"},
                       {"hidden_act", "silu"},
                       {"hidden_size", 64},
                       {"intermediate_size", 128},
                       {"num_hidden_layers", 1},
                       {"num_attention_heads", 4},
                       {"num_key_value_heads", 2},
                       {"max_position_embeddings", kContext},
                       {"rms_norm_eps", 1e-6},
                       {"rope_theta", 1000000.0},
                       {"tie_word_embeddings", true},
                       {"torch_dtype", "bfloat16"},
                       {"use_sliding_window", false},
                       {"vocab_size", 151936},
                       {"bos_token_id", 151643},
                       {"eos_token_id", 151645}};
  std::ofstream(cfg_dir / "config.json") << config.dump(2);
  const ProcessResult synth =
      run_process({keel_binary().string(), "synth", "--config", (cfg_dir / "config.json").string(), "--out", dir.string()},
                  current_environment(), tmp.path(), std::chrono::seconds(120));
  if (synth.exit_code != 0) throw std::runtime_error("keel synth failed:\n" + synth.out + synth.err);
  const auto tokenizer_dir = shared_dir() / "fixtures" / "tokenizers" / "qwen2.5";
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) std::filesystem::copy_file(tokenizer_dir / f, dir / f);

  // The four token ids, from the tokenizer itself ("\n" is "Ċ" and U+0301 "Ìģ" in byte-level BPE).
  const json tok = json::parse(read_text(dir / "tokenizer.json"));
  const int64_t newline = tok["model"]["vocab"].at("\xC4\x8A").get<int64_t>();
  const int64_t hello = tok["model"]["vocab"].at("Hello").get<int64_t>();
  const int64_t acute = tok["model"]["vocab"].at("\xC3\x8C\xC4\xA3").get<int64_t>();
  int64_t im_end = -1;
  for (const auto& t : tok["added_tokens"])
    if (t["content"] == "<|im_end|>") im_end = t["id"].get<int64_t>();
  if (im_end < 0) throw std::runtime_error("no <|im_end|> in the Qwen2.5 tokenizer");

  std::fstream f(dir / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
  uint64_t header_len = 0;
  f.read(reinterpret_cast<char*>(&header_len), 8);
  std::string header(header_len, '\0');
  f.read(header.data(), static_cast<std::streamsize>(header_len));
  const json h = json::parse(header);
  const uint64_t data = 8 + header_len;
  auto write_row = [&](const json& t, int64_t row, int64_t width, const std::vector<float>& values) {
    if (t["dtype"] != "BF16") throw std::runtime_error("keel synth wrote " + t["dtype"].get<std::string>() + ", not BF16");
    std::vector<uint16_t> out;
    for (float v : values) out.push_back(bf16(v));
    f.seekp(static_cast<std::streamoff>(data + t["data_offsets"][0].get<uint64_t>() + 2 * row * width));
    f.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(2 * out.size()));
  };
  const json& emb = h.at("model.embed_tokens.weight");
  const int64_t vocab = emb["shape"][0], hidden = emb["shape"][1];
  for (int64_t t = 0; t < vocab; ++t) {
    std::vector<float> first4 = {1, 0, 0, 0};
    if (t == newline) first4 = {0, 3, 0, 0};
    if (t == hello) first4 = {0, 6, 3, 0};
    if (t == acute) first4 = {0, 0, 30, 30};
    if (t == im_end) first4 = {0, 0, 0, 80};
    write_row(emb, t, hidden, first4);
  }
  std::vector<float> norm(static_cast<size_t>(hidden), 0.0f);
  norm[0] = norm[1] = norm[2] = norm[3] = 1.0f;
  write_row(h.at("model.norm.weight"), 0, hidden, norm);
  if (!f) throw std::runtime_error("cannot patch " + (dir / "model.safetensors").string());
  return dir;
}

std::vector<json> json_lines(const std::string& text) {
  std::vector<json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, false);
    if (!j.is_discarded()) out.push_back(std::move(j));
  }
  return out;
}

// One `claude -p` run: its stream-json messages and the final `result`.
struct ClaudeRun {
  ProcessResult process;
  std::vector<json> messages;
  json result;                    // the `result` message, null when there was none
  std::vector<json> assistant;    // `assistant` messages
  std::string api_error_text;     // the first assistant text that starts with "API Error"
};

ClaudeRun run_claude(const std::vector<std::string>& args, const std::vector<std::string>& env,
                     const std::filesystem::path& cwd, std::chrono::seconds timeout) {
  std::vector<std::string> argv = {(client_install().node_modules / ".bin" / "claude").string()};
  argv.insert(argv.end(), args.begin(), args.end());
  ClaudeRun run;
  run.process = run_process(argv, env, cwd, timeout);
  run.messages = json_lines(run.process.out);
  for (const auto& m : run.messages) {
    if (m.value("type", "") == "result") run.result = m;
    if (m.value("type", "") == "assistant") {
      run.assistant.push_back(m);
      for (const auto& block : m.value("message", json::object()).value("content", json::array()))
        if (block.value("type", "") == "text" && block.value("text", "").rfind("API Error", 0) == 0 &&
            run.api_error_text.empty())
          run.api_error_text = block["text"];
    }
  }
  return run;
}

int64_t usage_value(const json& usage, const char* key) {
  return usage.is_object() && usage.contains(key) && usage[key].is_number_integer() ? usage[key].get<int64_t>() : 0;
}

std::string describe(const ClaudeRun& run) {
  std::ostringstream s;
  s << "exit " << run.process.exit_code << (run.process.timed_out ? " (timed out)" : "") << " after "
    << run.process.seconds << " s\n--- stdout (stream-json) ---\n"
    << run.process.out.substr(0, 20000) << "\n--- stderr ---\n"
    << run.process.err.substr(0, 8000);
  return s.str();
}

TEST(ClaudeCode, HeadlessSessionAgainstKeelServe) {
  const ClientInstall& install = client_install();
  if (!install.skip_reason.empty()) GTEST_SKIP() << install.skip_reason;
  ASSERT_TRUE(install.error.empty()) << install.error;
  std::cout << "client install: " << install.seconds << " s\n";

  TempDir tmp;
  const auto model = write_hello_model(tmp);
  const auto t0 = std::chrono::steady_clock::now();
  ServerProcess server({"--model", model.string(), "--alias", "*", "--context", std::to_string(kContext)});
  const double start_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const auto proxy_log = tmp.path() / "requests.jsonl";
  BackgroundProcess proxy({install.node.string(), (client_scripts_dir() / "recording_proxy.cjs").string(),
                           std::to_string(server.port()), proxy_log.string()},
                          current_environment());
  const std::string proxy_port = proxy.wait_for_line("listening ", std::chrono::seconds(30));

  const auto home = tmp.path() / "home";
  // Decomposed names, as macOS writes them: the working directory reaches the system prompt.
  const auto project = tmp.path() / "project-Re\u0301sume\u0301s";
  std::filesystem::create_directories(home);
  std::filesystem::create_directories(project);
  const char* path = std::getenv("PATH");
  // The whole environment Claude Code sees. Nothing else leaks in (no API keys of the machine).
  const std::vector<std::string> env = {
      "PATH=" + std::string(path ? path : "/usr/local/bin:/usr/bin:/bin"),
      "HOME=" + home.string(),
      "ANTHROPIC_BASE_URL=http://127.0.0.1:" + proxy_port,
      "ANTHROPIC_AUTH_TOKEN=keel-test",
      // A test must not update the client it pins. Everything else is Claude Code's default: its
      // connectivity check (HEAD /api/hello), telemetry attempts that fail without a network, and
      // max_tokens 128000 (keel caps and clamps it).
      "DISABLE_AUTOUPDATER=1",
      // An error keel returns ends the run at once instead of after ~10 backed-off retries.
      "CLAUDE_CODE_MAX_RETRIES=0",
  };

  // Turn 1 prefills Claude Code's whole prompt (~11.7k tokens): ~5 s in a Release build on 2
  // threads, ~45 s under AddressSanitizer.
  std::ofstream(project / "Re\u0301sume\u0301.pdf") << "%PDF-1.4\n";
  const ClaudeRun first = run_claude({"-p", "Reply with one word about Re\u0301sume\u0301.pdf: hello.", "--output-format",
                                      "stream-json", "--verbose"},
                                     env, project, std::chrono::seconds(330));
  // Turn 2 continues the same conversation from Claude Code's transcript under HOME.
  const ClaudeRun second = run_claude(
      {"-p", "Say it once more.", "--continue", "--output-format", "stream-json", "--verbose"}, env, project,
      std::chrono::seconds(180));

  const std::vector<json> requests =
      std::filesystem::exists(proxy_log) ? json_lines(read_text(proxy_log)) : std::vector<json>{};
  const std::string log = server.log();
  std::cout << "keel serve start " << start_seconds << " s, turn 1 " << first.process.seconds << " s, turn 2 "
            << second.process.seconds << " s, " << requests.size() << " requests\n";
  ::testing::Test::RecordProperty("turn1_seconds", std::to_string(first.process.seconds));
  ::testing::Test::RecordProperty("turn2_seconds", std::to_string(second.process.seconds));

  // What Claude Code sent, one line per request (visible in the test output).
  std::ostringstream sent;
  for (const auto& r : requests) {
    const json b = r.value("body", json());
    sent << r.value("method", "") << " " << r.value("url", "") << " -> " << r.value("status", 0) << " ("
         << r.value("ms", 0) << " ms)";
    if (b.is_object()) {
      sent << " model " << b.value("model", "") << ", max_tokens " << b.value("max_tokens", 0) << ", "
           << b.value("tools", json::array()).size() << " tools, roles";
      for (const auto& m : b.value("messages", json::array())) sent << " " << m.value("role", "?");
      if (b.contains("thinking")) sent << ", thinking " << b["thinking"].dump();
    }
    sent << ", anthropic-beta: " << r.value("headers", json::object()).value("anthropic-beta", "(none)") << "\n";
  }
  auto result_line = [](const ClaudeRun& run) {
    if (!run.result.is_object()) return std::string("(none)");
    return run.result.value("subtype", "?") + ", is_error " + run.result.value("is_error", json()).dump() + ", " +
           run.result.value("terminal_reason", "?") + ": " + run.result.value("result", json("")).dump().substr(0, 300);
  };
  std::cout << sent.str() << "keel serve log:\n"
            << log << "turn 1 result: " << result_line(first) << "\nturn 2 result: " << result_line(second) << "\n";

  // (a) Turn 1 completes without an API error.
  ASSERT_FALSE(first.result.is_null()) << "no result message from turn 1\n" << describe(first);
  EXPECT_EQ(first.result.value("subtype", ""), "success") << describe(first);
  EXPECT_EQ(first.result.value("is_error", true), false) << describe(first);
  EXPECT_EQ(first.api_error_text, "") << describe(first);
  EXPECT_EQ(first.process.exit_code, 0) << describe(first);
  // The answer carries the decomposed acute that turn 2 sends back.
  EXPECT_NE(first.result.value("result", "").find("\u0301"), std::string::npos) << describe(first);

  // (b) Turn 2's first request reads turn 1's whole prompt from the prefix cache.
  ASSERT_FALSE(first.assistant.empty()) << describe(first);
  const json usage1 = first.assistant.front().value("message", json::object()).value("usage", json::object());
  const int64_t prompt1 = usage_value(usage1, "input_tokens") + usage_value(usage1, "cache_read_input_tokens") +
                          usage_value(usage1, "cache_creation_input_tokens");
  std::cout << "turn 1 prompt: " << prompt1 << " tokens (Qwen2.5 tokenizer)\n";
  ::testing::Test::RecordProperty("turn1_prompt_tokens", std::to_string(prompt1));
  EXPECT_GT(prompt1, 1000) << usage1.dump();
  ASSERT_FALSE(second.result.is_null()) << "no result message from turn 2\n" << describe(second);
  EXPECT_EQ(second.result.value("is_error", true), false) << describe(second);
  ASSERT_FALSE(second.assistant.empty()) << describe(second);
  const json usage2 = second.assistant.front().value("message", json::object()).value("usage", json::object());
  std::cout << "turn 2 usage: " << usage2.dump() << "\n";
  EXPECT_GE(usage_value(usage2, "cache_read_input_tokens"), prompt1)
      << "turn 2 did not reuse turn 1's prompt: " << usage2.dump();

  // (c) The mid-conversation system message at messages[1] was sent and answered 200 in full.
  bool system_at_1 = false, answered = false;
  std::string betas;
  for (const auto& r : requests) {
    const json b = r.value("body", json());
    if (!b.is_object() || r.value("url", "").rfind("/v1/messages", 0) != 0) continue;
    const json& messages = b.value("messages", json::array());
    if (messages.size() < 2 || messages[1].value("role", "") != "system") continue;
    system_at_1 = true;
    betas = r.value("headers", json::object()).value("anthropic-beta", "");
    const json& events = r.value("sse_events", json::array());
    if (r.value("status", 0) == 200 && r.value("error_events", json::array()).empty() &&
        (!b.value("stream", false) || (!events.empty() && events.back() == "message_stop")))
      answered = true;
  }
  EXPECT_TRUE(system_at_1) << "no request had {\"role\":\"system\"} at messages[1]:\n" << sent.str();
  EXPECT_TRUE(answered) << "the request with a system message at messages[1] was not answered 200 in full:\n"
                        << sent.str();
  std::cout << "mid-conversation system message sent"
            << (betas.find("mid-conversation-system-2026-04-07") != std::string::npos
                    ? " with the mid-conversation-system-2026-04-07 beta header\n"
                    : " without a mid-conversation-system beta header (generally available in this version)\n");

  // (d) No 4xx/5xx from keel (its log has a line for each) and no failed generation.
  EXPECT_EQ(error_lines(log), "") << log;
  EXPECT_EQ(log.find(", error: "), std::string::npos) << log;
  for (const auto& r : requests) {
    EXPECT_LT(r.value("status", 0), 400) << r.dump().substr(0, 4000);
    EXPECT_TRUE(r.value("error_events", json::array()).empty()) << r.dump().substr(0, 4000);
    EXPECT_FALSE(r.contains("upstream_error")) << r.dump().substr(0, 4000);
  }
  EXPECT_GE(requests.size(), 2u) << sent.str();
}

}  // namespace
}  // namespace keel::test
