// keel serve: the Anthropic Messages and OpenAI Chat Completions APIs over one local model.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <pthread.h>
#include <thread>

#include "args.h"
#include "commands.h"
#include "kv_disk_flags.h"
#include "keel/api/http_access.h"
#include "keel/api/model_registry.h"
#include "keel/api/preparation_gate.h"
#include "keel/api/server.h"
#include "keel/arch/model_source.h"
#include "keel/constrain/token_mask.h"
#include "keel/engine/scheduler.h"
#include "keel/engine/served_model.h"
#include "keel/engine/session_cache.h"
#include "keel/kv/kv_footprint.h"
#include "keel/kv/kv_policy.h"
#include "keel/ops/simd_kernels.h"
#include "keel/plan/number_format.h"
#include "keel/plan/planner.h"
#include "keel/plan/serving_budget.h"
#include "keel/util/error.h"
#include "keel/util/heap.h"

namespace keel::cli {
namespace {

// Flags may also come from the environment (KEEL_PORT=4000 ...), flags winning.
std::optional<std::string> flag_or_env(const Args& args, const std::string& flag) {
  if (auto v = args.get(flag)) return v;
  std::string env = "KEEL_";
  for (char c : flag) env += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (const char* v = std::getenv(env.c_str()); v && *v) return std::string(v);
  return std::nullopt;
}

// The items of a comma-separated value, each trimmed of spaces and tabs; an empty item stays in
// the list (as "") so a caller can tell "a,,b" from "a,b".
std::vector<std::string> comma_items(const std::string& value) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= value.size()) {
    const size_t comma = std::min(value.find(',', at), value.size());
    std::string item = value.substr(at, comma - at);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    out.push_back(std::move(item));
    at = comma + 1;
  }
  return out;
}

// A repeatable flag: every --flag given (each may also list values separated by commas), else the
// comma-separated list in KEEL_FLAG. Empty items are dropped.
std::vector<std::string> list_flag(const Args& args, const std::string& flag) {
  std::vector<std::string> given = args.get_all(flag);
  if (given.empty())
    if (auto v = flag_or_env(args, flag)) given.push_back(*v);
  std::vector<std::string> out;
  for (const auto& value : given)
    for (auto& item : comma_items(value))
      if (!item.empty()) out.push_back(std::move(item));
  return out;
}

// Every API key, each once in the order given: --api-key (repeatable, commas separate keys; else
// KEEL_API_KEY), then --api-key-file (else KEEL_API_KEY_FILE): one key per line, blank lines and
// lines starting with '#' skipped. The file and the environment keep keys out of the process list.
//
// An empty key is refused, never dropped: `--api-key "$UNSET"` or KEEL_API_KEY= would otherwise
// start a server that asks for no key at all, the opposite of what its user meant.
std::vector<std::string> api_keys(const Args& args) {
  std::vector<std::string> given = args.get_all("api-key");
  std::string source = "--api-key";
  if (given.empty())
    if (const char* env = std::getenv("KEEL_API_KEY")) {
      given.push_back(env);
      source = "KEEL_API_KEY";
    }
  std::vector<std::string> keys;
  for (const auto& value : given)
    for (auto& key : comma_items(value)) {
      if (key.empty())
        throw Error(source + ": an empty key (an empty value, or a comma with no key beside it); " +
                    "give every key, or no " + source + " to serve without keys");
      keys.push_back(std::move(key));
    }
  if (const char* file = std::getenv("KEEL_API_KEY_FILE"); file && !*file && !args.get("api-key-file"))
    throw Error("KEEL_API_KEY_FILE: set but empty; name the key file, or unset it");
  if (auto path = flag_or_env(args, "api-key-file")) {
    std::ifstream in(*path);
    if (!in) throw Error("--api-key-file: cannot read '" + *path + "'");
    const size_t before = keys.size();
    std::string line;
    while (std::getline(in, line)) {
      line.erase(0, line.find_first_not_of(" \t\r"));
      line.erase(line.find_last_not_of(" \t\r") + 1);
      if (!line.empty() && line.front() != '#') keys.push_back(line);
    }
    if (keys.size() == before) throw Error("--api-key-file: '" + *path + "' holds no key (one key per line)");
    std::error_code ec;
    const auto perms = std::filesystem::status(*path, ec).permissions();
    if (!ec && (perms & (std::filesystem::perms::group_read | std::filesystem::perms::others_read)) !=
                   std::filesystem::perms::none)
      std::fprintf(stderr, "keel serve: warning: --api-key-file '%s' is readable by other users (chmod 600 it)\n",
                   path->c_str());
  }
  std::vector<std::string> unique;
  for (auto& key : keys)
    if (std::find(unique.begin(), unique.end(), key) == unique.end()) unique.push_back(std::move(key));
  return unique;
}

long int_flag(const Args& args, const std::string& flag, long fallback, long min, long max) {
  auto v = flag_or_env(args, flag);
  return v ? parse_int_flag(flag, *v, min, max) : fallback;
}

// Upper bounds of serve's own numeric flags (docs/cli.md).
constexpr long kMaxToolRetries = 32;
constexpr long kMaxQueueDepth = 1024;
constexpr long kMaxBodyMiB = 1024;
constexpr long kMaxParallel = 64;

double gib_flag(const Args& args, const std::string& flag) {
  return parse_number_flag(flag, *flag_or_env(args, flag), 0, kMaxGiB, true);
}

// What serve runs with (plan/serving_budget.h), from its flags. Refuses, before anything is
// loaded, a model and context that cannot fit (the error carries the plan).
plan::ServingBudget plan_serving(const Args& args, const arch::ModelSource& model) {
  plan::ServingRequest request;
  if (flag_or_env(args, "context")) request.plan.context = int_flag(args, "context", 0, 1, kMaxTokenCount);
  if (flag_or_env(args, "memory")) request.plan.memory_gib = gib_flag(args, "memory");
  request.kv_policy = flag_or_env(args, "kv-policy").value_or("auto");
  if (flag_or_env(args, "kv-memory")) request.kv_memory_gib = gib_flag(args, "kv-memory");
  request.prefill_chunk = SchedulerOptions{}.prefill_chunk;
  return plan::serving_budget(model, std::move(request));
}

// Who besides local programs may call: said at start, with a warning for each rule turned off.
void log_access(const api::ServerOptions& o) {
  auto joined = [](const std::vector<std::string>& items) {
    std::string out;
    for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
    return out;
  };
  const auto has_star = [](const std::vector<std::string>& items) {
    return std::find(items.begin(), items.end(), "*") != items.end();
  };
  if (has_star(o.allow_origins))
    std::fprintf(stderr, "keel serve: warning: --allow-origin '*': every web page this machine's browsers open may call "
                         "this server%s\n",
                 o.api_keys.empty() ? " and run the model (no --api-key)" : "");
  else if (!o.allow_origins.empty())
    std::fprintf(stderr, "keel serve: web pages allowed to call (--allow-origin): %s\n", joined(o.allow_origins).c_str());
  if (has_star(o.allow_hosts))
    std::fprintf(stderr, "keel serve: warning: --allow-host '*': any Host name is accepted, so DNS rebinding is not "
                         "blocked\n");
  else if (!o.allow_hosts.empty())
    std::fprintf(stderr, "keel serve: Host names accepted besides loopback (--allow-host): %s\n", joined(o.allow_hosts).c_str());
  if ((o.host == "0.0.0.0" || o.host == "::") && o.allow_hosts.empty())
    std::fprintf(stderr, "keel serve: listening on every address, but only requests addressed to a loopback name are "
                         "answered; add --allow-host NAME for each name other machines use\n");
}

// The first SIGINT or SIGTERM drains the server (running turns get the grace period, waiting ones
// a 503); a second one stops it at once.
void wait_for_shutdown_signal(api::Server& server, std::chrono::seconds grace) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "keel serve: %s: no new connections; running requests get %lld s to finish, waiting ones 503 "
                       "(a second signal stops at once)\n",
               sig == SIGINT ? "interrupted" : "terminated", static_cast<long long>(grace.count()));
  std::fflush(stderr);
  server.shutdown();
  sigwait(&signals, &sig);
  std::fprintf(stderr, "keel serve: second signal, stopping now\n");
  server.stop();
}

}  // namespace

int serve_command(const CommandArgs& argv) {
  Args args(argv, {"model", "alias", "host", "port", "api-key", "threads", "context", "kv-policy", "kv-memory",
                   "kv-rotate", "memory", "tool-call-format", "tool-retries", "constrained-tool-calls", "queue-depth", "max-body-mb",
                   "allow-origin", "allow-host", "api-key-file", "shutdown-grace", "parallel", "kv-disk", "kv-disk-gb",
                   "warm", "capture-requests", "kv-state-interval"});
  if (!args.positional().empty()) throw Error("unexpected argument '" + args.positional()[0] + "'");
  const auto model_dir = flag_or_env(args, "model");
  if (!model_dir) throw Error("--model DIR is required (or KEEL_MODEL)");

  // Signals go to the thread that waits for them, never to an HTTP or engine thread: blocked here,
  // before any thread starts (threads inherit the mask).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  configure_heap_for_serving();

  api::ServerOptions options;
  options.host = flag_or_env(args, "host").value_or("127.0.0.1");
  options.api_keys = api_keys(args);
  options.allow_hosts = list_flag(args, "allow-host");
  options.allow_origins = list_flag(args, "allow-origin");
  // A value that can never match (an origin without its scheme) is refused before the model loads.
  const api::AccessRules access_check(
      api::AccessOptions{options.host, options.allow_hosts, options.allow_origins, options.api_keys});

  // Numbers are checked before anything loads (ranges: docs/cli.md). The queue depth sizes an
  // HTTP thread pool up front (a thread per waiting request), so it is bounded.
  options.port = static_cast<int>(int_flag(args, "port", 4000, 0, 65535));
  options.tool_retries = static_cast<int>(int_flag(args, "tool-retries", 2, 0, kMaxToolRetries));
  const std::string constrained = flag_or_env(args, "constrained-tool-calls").value_or("on");
  if (constrained != "on" && constrained != "off")
    throw Error("--constrained-tool-calls: '" + constrained + "' is neither on nor off");
  options.constrained_tool_calls = constrained == "on";
  options.queue_depth = static_cast<size_t>(int_flag(args, "queue-depth", 64, 1, kMaxQueueDepth));
  options.max_body_bytes = static_cast<size_t>(int_flag(args, "max-body-mb", 32, 1, kMaxBodyMiB)) << 20;
  const int threads = static_cast<int>(int_flag(args, "threads", 0, 0, kMaxThreads));
  options.shutdown_grace = std::chrono::seconds(int_flag(args, "shutdown-grace", 10, 0, 3600));
  const long parallel_flag = int_flag(args, "parallel", 0, 1, kMaxParallel);  // 0: not given

  // --model is resolved once: the plan, the disk tier's identity and the loader read the same files.
  const arch::ModelSource source = arch::resolve_model(*model_dir);
  // Refuse before loading any weights what cannot fit (the plan says why).
  const plan::ServingBudget serving = plan_serving(args, source);
  const plan::Plan& plan = serving.plan;
  const std::string rotate = flag_or_env(args, "kv-rotate").value_or("on");
  if (rotate != "on" && rotate != "off") throw Error("--kv-rotate: '" + rotate + "' is neither on nor off");

  // Warm-up requests are read and parsed now: a bad file costs nothing.
  std::vector<api::WarmRequest> warm;
  for (const std::string& path : list_flag(args, "warm")) warm.push_back(api::read_warm_request(path));
  if (auto dir = flag_or_env(args, "capture-requests")) {
    if (dir->empty()) throw Error("--capture-requests: the folder is empty");
    options.capture_dir = *dir;
  }

  // The model's identity for the disk tier is read (a few pages per weight file) before the model
  // loads; the tier's folder is made and indexed with the pool.
  const kv::KvDiskOptions disk = kv_disk_options(flag_or_env(args, "kv-disk"), flag_or_env(args, "kv-disk-gb"), source.files);

  ServedModelOptions model_options;
  model_options.threads = threads;
  if (auto f = flag_or_env(args, "tool-call-format")) model_options.tool_call_format = toolcall::parsed_tool_call_format_from_name(*f);
  ServedModel model(source, model_options);
  const ModelSpec& spec = model.weights().spec;
  // Turns at once: --parallel, else as many as the pool holds 4,096-token conversations, 2 to 8.
  options.parallel = static_cast<size_t>(parallel_flag ? parallel_flag : serving.default_parallel);
  const int64_t state_interval = args.get_int("kv-state-interval", kv::kDefaultStateInterval, 1, 1 << 20);
  SessionCache session(spec, serving.kv_budget_bytes, serving.policy, rotate == "on", plan.context, 2 * options.parallel,
                       disk, state_interval);

  options.aliases = args.get_all("alias");
  if (options.aliases.empty())
    if (auto a = flag_or_env(args, "alias")) options.aliases.push_back(*a);

  std::fprintf(stderr, "keel serve: model %s (%s, %lld layers, %s weights), %d threads, simd %s\n",
               model.dir().string().c_str(), spec.model_type.c_str(), static_cast<long long>(spec.num_layers),
               model.weights().formats_text().c_str(), model.threads(), ops::simd_target_name());
  std::fprintf(stderr, "keel serve: tool-call format: %s (%s)\n", std::string(model.tool_call_format().name).c_str(),
               model.tool_call_format_origin().c_str());
  std::fprintf(stderr, "keel serve: reasoning: %s\n", toolcall::describe_reasoning_control(model.reasoning()).c_str());
  {
    // Structured output and constrained calls read the vocabulary as a byte trie; built now, with
    // the masks every grammar shares, the first such request does not wait for them.
    const auto start = std::chrono::steady_clock::now();
    const constrain::Vocabulary& vocabulary = model.vocabulary();
    vocabulary.warm();
    std::fprintf(stderr, "keel serve: constrained decoding: %zu text tokens ready in %.2f s\n", vocabulary.text_tokens(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::fprintf(stderr, "keel serve: KV policy: %s (%s), rotation %s\n", serving.policy.describe().c_str(),
               serving.policy_origin.c_str(), rotate.c_str());
  if (const kv::KvLinearLayers& linear = session.layout().linear(); !linear.empty())
    std::fprintf(stderr,
                 "keel serve: recurrent state: %zu linear-attention layers, f32, %s live per turn, snapshots of %s "
                 "after every %lld blocks, at the preamble's end, each turn's latest and its prompt's end (not on disk)\n",
                 linear.layers.size(), plan::format_size(static_cast<uint64_t>(linear.live_bytes())).c_str(),
                 plan::format_size(static_cast<uint64_t>(linear.snapshot_bytes())).c_str(),
                 static_cast<long long>(state_interval));
  if (disk.enabled())
    std::fprintf(stderr, "keel serve: %s\n", describe_kv_disk(session.stats().disk, disk.dir).c_str());
  std::fprintf(stderr, "keel serve: scheduler: up to %zu turns at once%s, batched; %zu live sequences kept\n",
               options.parallel, parallel_flag ? " (--parallel)" : " (from the KV pool's size)",
               2 * options.parallel);
  std::fprintf(stderr, "keel serve: memory: weights %s + KV pool %s (context %lld tokens) + scratch %s, ceiling %s (%s)\n",
               plan::format_size(plan.weights.bytes.value_or(0)).c_str(),
               plan::format_size(static_cast<uint64_t>(serving.kv_budget_bytes)).c_str(), static_cast<long long>(plan.context),
               plan::format_size(plan.scratch.total()).c_str(), plan::format_size(plan.ceiling.bytes).c_str(),
               plan.ceiling.source.c_str());

  options.preparation_budget_bytes = serving.preparation_budget_bytes;
  std::fprintf(stderr, "keel serve: request preparation: up to %s at once (bodies up to %s, about %zu bytes per body "
                       "byte while parsed and tokenized)\n",
               plan::format_size(api::effective_preparation_budget(options.preparation_budget_bytes, options.max_body_bytes)).c_str(),
               plan::format_size(options.max_body_bytes).c_str(), api::kPreparationBytesPerBodyByte);

  api::Server server(model, session, options);
  const int port = server.bind();
  std::string names;
  for (const auto& name : api::ModelRegistry(model.name(), options.aliases).names())
    names += (names.empty() ? "" : ", ") + ('"' + name + '"');
  std::fprintf(stderr, "keel serve: answers to %s\n", names.c_str());
  for (const auto& a : options.aliases)
    if (a == "*")
      std::fprintf(stderr, "keel serve: --alias '*': every model name a client sends is answered by %s\n",
                   model.dir().string().c_str());
  if (options.api_keys.size() == 1)
    std::fprintf(stderr, "keel serve: API key required (x-api-key or Authorization: Bearer)\n");
  else if (options.api_keys.size() > 1)
    std::fprintf(stderr, "keel serve: %zu API keys accepted (x-api-key or Authorization: Bearer), each with its own "
                         "prefix-cache namespace\n", options.api_keys.size());
  if (!args.get_all("api-key").empty())
    std::fprintf(stderr, "keel serve: note: --api-key is visible to other users in the process list; "
                         "--api-key-file or KEEL_API_KEY keep it out\n");
  log_access(options);
  std::fprintf(stderr, "keel serve: listening on http://%s:%d\n", options.host.c_str(), port);
  std::fflush(stderr);

  if (!options.capture_dir.empty())
    std::fprintf(stderr, "keel serve: --capture-requests: every chat request's body is saved under %s (whole "
                         "conversations: keep the folder private)\n", options.capture_dir.c_str());
  if (!warm.empty()) {
    std::fprintf(stderr, "keel serve: warming: %zu request%s prefill in the background (/health says \"warming\": "
                         "true until done)\n", warm.size(), warm.size() == 1 ? "" : "s");
    server.warm(std::move(warm));
  }
  std::fflush(stderr);
  std::thread signal_waiter([&server, grace = options.shutdown_grace] { wait_for_shutdown_signal(server, grace); });
  signal_waiter.detach();
  server.run();
  std::fprintf(stderr, "keel serve: stopped\n");
  return 0;
}

}  // namespace keel::cli
