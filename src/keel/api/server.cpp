#include "keel/api/server.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>

#include "keel/api/cache_salt.h"
#include "keel/api/http_access.h"
#include "keel/api/kv_routes.h"
#include "keel/api/log_text.h"
#include "keel/api/request_capture.h"
#include "keel/api/server_state.h"
#include "keel/engine/served_model.h"
#include "keel/engine/session_cache.h"
#include "keel/util/error.h"

namespace keel::api {

namespace {
// The reason of the error the current request was answered with, for the log line, kept here by
// send_error on the thread that logs the request after answering it.
thread_local std::string t_error_reason;

void set_retry_after(http::Response& res, const ApiError& error) {
  if (error.retry_after_seconds > 0) res.set_header("Retry-After", std::to_string(error.retry_after_seconds));
}
}  // namespace

void send_error(http::Response& res, Protocol protocol, const ApiError& error) {
  res.status = error_status(protocol, error);
  res.set_content(error_body(protocol, error), "application/json");
  set_retry_after(res, error);
  t_error_reason = error.what();
}

namespace {

// The OpenAI routes, and every path under a resource only OpenAI's API has (so an SDK calling
// one keel does not serve reads the 404 it expects), answer in OpenAI's envelope; /v1/models and
// /v1/files, which both APIs have, in both at once (shared_error_body); everything else in
// Anthropic's.
enum class Envelope { Anthropic, OpenAI, Shared };

bool under(const std::string& path, std::string_view resource) {
  return path.rfind(resource, 0) == 0 && (path.size() == resource.size() || path[resource.size()] == '/');
}

Envelope envelope_of(const std::string& path) {
  static constexpr std::string_view kOpenAIResources[] = {
      "/v1/chat",       "/v1/completions", "/v1/responses",  "/v1/embeddings",   "/v1/audio",
      "/v1/images",     "/v1/moderations", "/v1/batches",    "/v1/fine_tuning",  "/v1/assistants",
      "/v1/threads",    "/v1/vector_stores", "/v1/uploads",  "/v1/realtime",     "/v1/conversations",
      "/v1/evals",      "/v1/containers",  "/v1/organization"};
  for (std::string_view resource : kOpenAIResources)
    if (under(path, resource)) return Envelope::OpenAI;
  if (under(path, "/v1/models") || under(path, "/v1/files")) return Envelope::Shared;
  return Envelope::Anthropic;
}

void send_error_for(http::Response& res, const std::string& path, const ApiError& error) {
  switch (envelope_of(path)) {
    case Envelope::Anthropic: return send_error(res, Protocol::Anthropic, error);
    case Envelope::OpenAI: return send_error(res, Protocol::OpenAI, error);
    case Envelope::Shared:
      res.status = error.status;
      res.set_content(shared_error_body(error), "application/json");
      set_retry_after(res, error);
      t_error_reason = error.what();
      return;
  }
}

// The metrics label of a path: its route, or "other" for every path no route serves, so that a
// scan of random URLs cannot add a series per URL to /metrics.
std::string route_label(const std::string& path) {
  static const char* const kRoutes[] = {"/v1/messages", "/v1/messages/count_tokens", "/v1/chat/completions", "/v1/responses",
                                        "/v1/models", "/health", "/metrics", "/api/hello"};
  for (const char* route : kRoutes)
    if (path == route) return path;
  if (path.size() > 11 && path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  if (path.size() > 14 && path.rfind("/v1/responses/", 0) == 0) return "/v1/responses/{id}";
  return "other";
}

// The unsigned number in the query parameter `name` of a request target ("/kv/events?after=12"),
// or `fallback` when there is none; throws keel::Error when it is not a number.
uint64_t query_number(const std::string& target, std::string_view name, uint64_t fallback) {
  const size_t query = target.find('?');
  if (query == std::string::npos) return fallback;
  std::string_view rest = std::string_view(target).substr(query + 1);
  while (!rest.empty()) {
    const std::string_view param = rest.substr(0, rest.find('&'));
    rest.remove_prefix(std::min(rest.size(), param.size() + 1));
    if (!param.starts_with(name) || param.size() <= name.size() || param[name.size()] != '=') continue;
    const std::string_view value = param.substr(name.size() + 1);
    uint64_t n = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || end != value.data() + value.size() || value.empty())
      throw Error("query parameter " + std::string(name) + ": '" + log_safe(std::string(value), 40) +
                  "' is not a whole number");
    return n;
  }
  return fallback;
}

// The most /kv/events answers at once: ~100 bytes each, so a page stays near a megabyte.
constexpr size_t kKvEventsPage = 10000;

// "req_" and 24 random characters: the form of Anthropic's request ids.
std::string new_request_id() {
  static constexpr char kAlphabet[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, sizeof kAlphabet - 2);
  std::string id = "req_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(rng)];
  return id;
}

// Why an error response was sent: the message of the envelope this server wrote (every envelope
// keeps it at error.message). Never the request body.
std::string error_reason(const http::Response& res) {
  if (!t_error_reason.empty()) return log_safe(t_error_reason, 500);
  const auto body = nlohmann::json::parse(res.body, nullptr, false);
  if (body.is_object() && body.contains("error") && body["error"].is_object() && body["error"].contains("message") &&
      body["error"]["message"].is_string())
    return log_safe(body["error"]["message"].get<std::string>(), 500);
  return "HTTP " + std::to_string(res.status);
}

int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return resident * 4096;
}

// The disk tier (--kv-disk): null without one.
nlohmann::ordered_json disk_json(const kv::KvPoolStats& st) {
  const kv::KvDiskStats& d = st.disk;
  if (!d.enabled) return nullptr;
  return {{"cap_bytes", d.cap_bytes},       {"files", d.files},
          {"bytes", d.bytes},               {"hits", d.hits},
          {"hit_bytes", d.hit_bytes},       {"reused_blocks", st.disk_reused_blocks},
          {"misses", d.misses},             {"writes", d.writes},
          {"write_bytes", d.write_bytes},   {"evictions", d.evictions},
          {"corrupt", d.corrupt},           {"mismatched", d.mismatched},
          {"write_errors", d.write_errors}, {"dropped", d.dropped},
          {"pending", d.pending}};
}

nlohmann::ordered_json kv_json(const ServerState& s) {
  const kv::KvPoolStats st = s.session.stats();
  // Prefix reuse is counted per turn in Metrics (reuse through the live sequence never opens a
  // pool sequence, so the pool's own open() counters would miss it): /metrics shows the same.
  const PrefixCounts prefix = s.metrics.prefix();
  nlohmann::ordered_json by_format = nlohmann::ordered_json::object();
  for (KvFormat f : kAllKvFormats) by_format[std::string(kv_format_name(f))] = st.bytes(f);
  return {{"policy", s.session.policy().describe()},
          {"rotate", s.session.rotate()},
          {"context_tokens", s.session.capacity()},
          {"used_tokens", s.kv_tokens.load()},
          {"budget_bytes", st.budget_bytes},
          {"used_bytes", st.used_bytes},
          {"bytes_by_format", by_format},
          {"blocks", {{"in_use", st.blocks_in_use}, {"cached", st.blocks_cached}, {"evictable", st.blocks_evictable},
                      {"free", st.blocks_free}}},
          {"prefix_cache", {{"hits", prefix.hits}, {"misses", prefix.misses}, {"hit_rate", prefix.hit_rate()},
                            {"reused_tokens", prefix.reused_tokens}, {"evictions", st.evictions}}},
          {"quantizations", st.quantizations},
          {"requantizations", st.requantizations},
          {"disk", disk_json(st)}};
}

// Pool gauges for /metrics.
std::vector<std::pair<std::string, std::pair<std::string, double>>> kv_gauges(const ServerState& s) {
  const kv::KvPoolStats st = s.session.stats();
  std::vector<std::pair<std::string, std::pair<std::string, double>>> g = {
      {"keel_kv_budget_bytes", {"Bytes the KV pool may use.", double(st.budget_bytes)}},
      {"keel_kv_used_bytes", {"Bytes the KV pool uses, all formats.", double(st.used_bytes)}},
      {"keel_kv_blocks_free", {"Blocks the unused KV budget still holds.", double(st.blocks_free)}},
      {"keel_kv_blocks_cached", {"Blocks in the prefix cache.", double(st.blocks_cached)}},
      {"keel_kv_evictions", {"Cached blocks freed to make room, since start.", double(st.evictions)}},
      {"keel_kv_requantizations", {"Blocks quantized twice (must stay 0).", double(st.requantizations)}},
  };
  for (KvFormat f : kAllKvFormats)
    g.push_back({"keel_kv_bytes_" + std::string(kv_format_name(f)),
                 {"Bytes of KV blocks stored as " + std::string(kv_format_name(f)) + ".", double(st.bytes(f))}});
  if (const kv::KvDiskStats& d = st.disk; d.enabled) {
    g.push_back({"keel_kv_disk_bytes", {"Bytes of KV block files in the --kv-disk folder.", double(d.bytes)}});
    g.push_back({"keel_kv_disk_cap_bytes", {"The --kv-disk folder's cap.", double(d.cap_bytes)}});
    g.push_back({"keel_kv_disk_files", {"KV block files in the --kv-disk folder.", double(d.files)}});
    g.push_back({"keel_kv_disk_hits", {"KV blocks read back from disk, since start.", double(d.hits)}});
    g.push_back({"keel_kv_disk_hit_bytes", {"Bytes of KV rows read back from disk, since start.", double(d.hit_bytes)}});
    g.push_back({"keel_kv_disk_misses", {"Disk lookups that found no block file, since start.", double(d.misses)}});
    g.push_back({"keel_kv_disk_writes", {"KV block files written, since start.", double(d.writes)}});
    g.push_back({"keel_kv_disk_write_bytes", {"Bytes of KV block files written, since start.", double(d.write_bytes)}});
    g.push_back({"keel_kv_disk_evictions", {"KV block files removed to stay under the cap, since start.", double(d.evictions)}});
    g.push_back({"keel_kv_disk_corrupt", {"KV block files refused as corrupt (removed), since start.", double(d.corrupt)}});
    g.push_back({"keel_kv_disk_mismatched",
                 {"KV block files refused as another model's or block's (removed), since start.", double(d.mismatched)}});
    g.push_back({"keel_kv_disk_write_errors", {"KV block files that could not be written, since start.", double(d.write_errors)}});
    g.push_back({"keel_kv_disk_pending", {"KV blocks queued for the disk writer.", double(d.pending)}});
  }
  return g;
}

// `full_path`: the caller presented the API key; others learn the folder name only (an absolute
// path names the user and the disk layout).
nlohmann::ordered_json health_json(const ServerState& s, bool full_path) {
  const SchedulerStats sched = s.scheduler.stats();
  const bool busy = sched.running > 0;
  // Draining (SIGTERM): a balancer's readiness check fails at once, while the running streams finish.
  nlohmann::ordered_json h = {{"status", s.shutting_down ? "draining" : "ok"}, {"model", s.registry.id()}};
  if (full_path) h["path"] = s.model.dir().string();
  h["aliases"] = s.registry.aliases();
  h["any_name"] = s.registry.wildcard();
  h["instance"] = s.instance;
  h["state"] = busy ? "generating" : "idle";
  h["queue"] = {{"waiting", sched.waiting}, {"running", sched.running}, {"max_waiting", s.scheduler.max_waiting()}};
  h["scheduler"] = {{"parallel", s.scheduler.options().parallel},
                    {"step_tokens", s.scheduler.options().step_tokens},
                    {"live_sequences", sched.live_sequences},
                    {"steps", sched.steps},
                    {"mean_batch", sched.steps ? static_cast<double>(sched.step_turns) / static_cast<double>(sched.steps) : 0.0},
                    {"largest_batch", sched.largest_batch},
                    {"preemptions", sched.preemptions},
                    {"idle_evictions", sched.idle_evictions}};
  h["tool_call_format"] = s.model.tool_call_format().name;
  h["memory"] = {{"weights_bytes", s.model.weights().decode_bytes().resident}, {"resident_bytes", resident_bytes()}};
  h["preparation"] = {{"budget_bytes", s.preparation.budget_bytes()}, {"used_bytes", s.preparation.used_bytes()},
                      {"waiting", s.preparation.waiting()}};
  h["kv"] = kv_json(s);
  h["warming"] = s.warmup.warming();
  h["warmup"] = {{"requests", s.warmup.total.load()},   {"done", s.warmup.done.load()},
                 {"failed", s.warmup.failed.load()},    {"prompt_tokens", s.warmup.prompt_tokens.load()},
                 {"reused_tokens", s.warmup.reused_tokens.load()}, {"yields", sched.background_yields}};
  return h;
}

// One model in both SDKs' shapes: Anthropic's {type, id, display_name, created_at} and OpenAI's
// {id, object, created, owned_by}.
nlohmann::ordered_json model_json(const std::string& name) {
  return {{"type", "model"}, {"id", name}, {"object", "model"}, {"display_name", name},
          {"created_at", "1970-01-01T00:00:00Z"}, {"created", 0}, {"owned_by", "keel"}};
}

nlohmann::ordered_json models_json(const ServerState& s) {
  nlohmann::ordered_json data = nlohmann::ordered_json::array();
  for (const auto& name : s.registry.names()) data.push_back(model_json(name));
  return {{"object", "list"}, {"data", data}, {"has_more", false},
          {"first_id", s.registry.id()}, {"last_id", s.registry.names().back()}};
}

SchedulerOptions scheduler_options(const ServerOptions& o) {
  SchedulerOptions s;
  s.parallel = o.parallel;
  s.max_waiting = o.queue_depth;
  return s;
}

}  // namespace

struct Server::Impl {
  using Handler = std::function<void(const http::Request&, http::Response&)>;

  // How many bodies of the largest size (--max-body-mb) may be received at once; past that, a new
  // upload is answered 503 before it is read, so stalled uploads cannot hold unbounded memory.
  static constexpr size_t kBodiesInFlight = 4;

  // One route: a method and an exact path, or every path under a prefix.
  struct Route {
    std::string method, path;
    bool prefix;
    bool needs_key;
    Handler handle;
  };

  ServerState state;
  AccessRules access;
  std::vector<Route> routes;
  std::unique_ptr<http::Server> http;

  // Every response gets its request id (request-id for Anthropic's SDK, x-request-id for
  // OpenAI's), the model's name, and CORS headers when its origin is allowed.
  void stamp(const http::Request& req, http::Response& res) const {
    const std::string id = new_request_id();
    res.set_header("request-id", id);
    res.set_header("x-request-id", id);
    res.set_header("x-keel-model", access.presents_key(req) ? state.model.dir().string() : state.model.name());
    access.add_cors_headers(req, res);
  }

  // Answers a request the access rules refuse (docs/serve.md, "Security model") and returns true.
  bool refuse(const http::Request& req, http::Response& res, bool needs_key) {
    const auto why = access.refusal(req, needs_key, req.method == "POST");
    if (!why) return false;
    send_error_for(res, req.path, *why);
    state.metrics.count_response(route_label(req.path), res.status);
    return true;
  }

  // The prefix-cache namespace of an admitted request. With several keys each key has its own, so a
  // key holder cannot learn another's prompts token by token from cache_read_input_tokens; with one
  // key or none everyone shares namespace 0, as before keys had namespaces.
  uint64_t cache_salt(const http::Request& req) const {
    if (access.key_count() < 2) return 0;
    const auto key = access.presented_key(req);
    return key ? cache_salt_for_key(state.options.api_keys[*key]) : 0;  // dispatch() let only key holders through
  }

  // Every 4xx and 5xx on stderr with its request id, so a client's report can be matched to a
  // line: method, path, status and the error message, never the body.
  static void log(const http::Request& req, const http::Response& res) {
    if (res.status >= 400)
      std::fprintf(stderr, "keel serve: %s %s %s -> %d: %s\n", log_safe(res.header("request-id")).c_str(),
                   req.path.empty() ? "-" : log_safe(req.method, 16).c_str(),
                   req.path.empty() ? "-" : log_safe(req.path).c_str(), res.status, error_reason(res).c_str());
    t_error_reason.clear();
  }

  const Route* find_route(const http::Request& req) const {
    for (const Route& r : routes)
      if (r.method == req.method && (r.prefix ? req.path.size() > r.path.size() && req.path.rfind(r.path, 0) == 0
                                              : req.path == r.path))
        return &r;
    return nullptr;
  }

  // Whether the access rules ask `req` for a key: its route says; /health and OPTIONS (CORS
  // preflights and plain OPTIONS, on any path: browsers never send credentials on a preflight)
  // never do, and a path no route serves always does.
  bool needs_key(const http::Request& req) const {
    if (req.method == "OPTIONS") return false;
    if (const Route* route = find_route(req)) return route->needs_key;
    return req.path != "/health";
  }

  // The access rules on the head alone, before the HTTP layer reads the body (http::HeadCheck): a
  // refused request's body is never received, so it costs no memory. Runs on the I/O thread.
  bool refuse_head(const http::Request& req, http::Response& res) {
    stamp(req, res);
    if (!refuse(req, res, needs_key(req))) return false;
    log(req, res);
    return true;
  }

  // Every request runs through here, on an HTTP worker, so a new route cannot forget the rules
  // (refuse_head has already checked them on the head; the body changes nothing they look at).
  void dispatch(const http::Request& req, http::Response& res) {
    stamp(req, res);
    try {
      if (req.method == "OPTIONS") {
        if (!refuse(req, res, false)) access.answer_options(req, res);
      } else if (const Route* route = find_route(req)) {
        if (!refuse(req, res, route->needs_key)) route->handle(req, res);
      } else if (!refuse(req, res, needs_key(req))) {
        send_error_for(res, req.path, not_found("no route " + req.method + " " + req.path));
        state.metrics.count_response(route_label(req.path), res.status);
      }
    } catch (const std::exception& e) {
      // A handler let this escape: whatever it was, it is not the request's fault.
      res.stream = nullptr;
      send_error_for(res, req.path, to_api_error(e, PlainError::ServerFault));
      state.metrics.count_response(route_label(req.path), res.status);
    }
    log(req, res);
  }

  // What the HTTP layer refuses before any route runs (keel/http: malformed or oversized requests,
  // slow clients, too many connections), in the route's envelope. The access rules still come
  // first when the head was read. Runs on the I/O thread: nothing here blocks.
  void refused(const http::Request& req, int status, const std::string& why, http::Response& res) {
    stamp(req, res);
    if (req.path.empty() || !refuse(req, res, needs_key(req))) {
      const std::string type = status >= 500 ? "api_error" : "invalid_request_error";
      if (status == 413) {
        send_error_for(res, req.path, request_too_large("the request body is larger than " +
                                                        std::to_string(state.options.max_body_bytes) + " bytes"));
      } else if (status == 503) {
        send_error_for(res, req.path, ApiError(503, "overloaded_error", "the server is busy: " + why));
        res.set_header("Retry-After", "1");
      } else if (status == 408) {
        send_error_for(res, req.path, ApiError(408, type, "the request was not received in time"));
      } else {
        send_error_for(res, req.path, ApiError(status, type, (status == 400 ? "malformed HTTP request: " : "") + why));
      }
      state.metrics.count_response(route_label(req.path), res.status);
    }
    log(req, res);
  }

  void add(std::string method, std::string path, bool needs_key, Handler handle) {
    const bool prefix = path.ends_with("/*");
    if (prefix) path.pop_back();
    routes.push_back({std::move(method), std::move(path), prefix, needs_key, std::move(handle)});
  }

  Impl(ServedModel& model, SessionCache& session, ServerOptions options)
      : state(model, session, options, scheduler_options(options)),
        access(AccessOptions{options.host, options.allow_hosts, options.allow_origins, options.api_keys}) {
    http::Limits limits;
    limits.max_body_bytes = state.options.max_body_bytes;
    limits.max_body_bytes_in_flight = kBodiesInFlight * state.options.max_body_bytes;
    // Every waiting client holds a worker (streams wait for their turn), so there are enough for a
    // full queue plus the running turns and a few quick routes. Idle connections hold none.
    limits.workers = state.options.queue_depth + state.options.parallel + 8;
    http = std::make_unique<http::Server>(
        limits, [this](const http::Request& req, http::Response& res) { dispatch(req, res); },
        [this](const http::Request& req, int status, const std::string& why, http::Response& res) {
          refused(req, status, why, res);
        },
        [this](const http::Request& head, http::Response& res) { return refuse_head(head, res); });

    add("POST", "/v1/messages", true, [this](const http::Request& req, http::Response& res) {
      if (!state.options.capture_dir.empty()) capture_request(state.options.capture_dir, "messages", req.body);
      handle_chat(state, Protocol::Anthropic, req, res, cache_salt(req));
    });
    add("POST", "/v1/chat/completions", true, [this](const http::Request& req, http::Response& res) {
      if (!state.options.capture_dir.empty()) capture_request(state.options.capture_dir, "chat-completions", req.body);
      handle_chat(state, Protocol::OpenAI, req, res, cache_salt(req));
    });
    add("POST", "/v1/responses", true, [this](const http::Request& req, http::Response& res) {
      if (!state.options.capture_dir.empty()) capture_request(state.options.capture_dir, "responses", req.body);
      handle_chat(state, Protocol::Responses, req, res, cache_salt(req));
    });
    // responses.retrieve / .delete / input_items: keel keeps no responses (store is not supported).
    for (const char* method : {"GET", "DELETE", "POST"})
      add(method, "/v1/responses/*", true, [this](const http::Request& req, http::Response& res) {
        const std::string id = req.path.substr(std::string_view("/v1/responses/").size());
        send_error_for(res, req.path,
                       not_found("no response \"" + id.substr(0, id.find('/')) +
                                 "\": keel keeps no responses (store is not supported); send the whole "
                                 "conversation as input"));
        state.metrics.count_response("/v1/responses/{id}", res.status);
      });
    add("POST", "/v1/messages/count_tokens", true, [this](const http::Request& req, http::Response& res) {
      handle_count_tokens(state, req, res);
    });
    add("GET", "/v1/models", true, [this](const http::Request&, http::Response& res) {
      res.set_content(models_json(state).dump(), "application/json");
      state.metrics.count_response("/v1/models", 200);
    });
    // models.retrieve of both SDKs. An alias of "*" answers every name, as the chat routes do.
    add("GET", "/v1/models/*", true, [this](const http::Request& req, http::Response& res) {
      const std::string name = req.path.substr(std::string_view("/v1/models/").size());
      try {
        state.registry.require(name);
        res.set_content(model_json(name).dump(), "application/json");
      } catch (const std::exception& e) {
        send_error_for(res, req.path, to_api_error(e, PlainError::BadRequest));
      }
      state.metrics.count_response("/v1/models/{id}", res.status);
    });
    // Claude Code's connectivity check (HEAD, before its first request unless non-essential traffic
    // is off). The HTTP layer answers HEAD with the GET route's head.
    add("GET", "/api/hello", false, [](const http::Request&, http::Response& res) {
      res.set_content("{\"status\":\"ok\"}", "application/json");
    });
    // Readiness (a balancer's health check): 503 once draining. Liveness: /live answers while
    // the process does, touching nothing that a busy engine holds.
    add("GET", "/health", false, [this](const http::Request& req, http::Response& res) {
      res.set_content(health_json(state, access.presents_key(req)).dump(), "application/json");
      if (state.shutting_down) res.status = 503;
    });
    add("GET", "/live", false, [](const http::Request&, http::Response& res) {
      res.set_content("{\"status\":\"ok\"}", "application/json");
    });
    add("GET", "/kv/blocks", true, [this](const http::Request&, http::Response& res) {
      res.set_content(kv_blocks_json(state.session.pool(), state.instance).dump(), "application/json");
      state.metrics.count_response("/kv/blocks", 200);
    });
    add("GET", "/kv/events", true, [this](const http::Request& req, http::Response& res) {
      try {
        const uint64_t after = query_number(req.target, "after", 0);
        const auto limit = static_cast<size_t>(query_number(req.target, "limit", kKvEventsPage));
        if (auto events = kv_events_json(state.session.pool(), state.instance, after, std::min(limit, kKvEventsPage)))
          res.set_content(events->dump(), "application/json");
        else
          send_error_for(res, req.path, ApiError(410, "invalid_request_error",
                                                 "events after " + std::to_string(after) +
                                                     " are gone (or from another process): start over from GET /kv/blocks"));
      } catch (const std::exception& e) {
        send_error_for(res, req.path, to_api_error(e, PlainError::BadRequest));
      }
      state.metrics.count_response("/kv/events", res.status);
    });
    for (const auto& [path, protocol] : {std::pair{"/kv/prefix/v1/messages", Protocol::Anthropic},
                                         std::pair{"/kv/prefix/v1/chat/completions", Protocol::OpenAI},
                                         std::pair{"/kv/prefix/v1/responses", Protocol::Responses}})
      add("POST", path, true, [this, protocol](const http::Request& req, http::Response& res) {
        handle_kv_prefix(state, protocol, req, res, cache_salt(req));
      });
    add("GET", "/metrics", true, [this](const http::Request&, http::Response& res) {
      auto gauges = kv_gauges(state);
      const SchedulerStats sched = state.scheduler.stats();
      gauges.push_back({"keel_queue_waiting", {"Requests waiting for the engine.", double(sched.waiting)}});
      gauges.push_back({"keel_queue_running", {"Requests the engine is running.", double(sched.running)}});
      gauges.push_back({"keel_live_sequences", {"Finished turns' KV sequences kept for their next turn.", double(sched.live_sequences)}});
      gauges.push_back({"keel_scheduler_steps", {"Batched forward passes, since start.", double(sched.steps)}});
      gauges.push_back({"keel_scheduler_step_turns", {"Turns in a step, summed over steps.", double(sched.step_turns)}});
      gauges.push_back({"keel_scheduler_step_tokens", {"Tokens run, summed over steps.", double(sched.step_tokens)}});
      gauges.push_back({"keel_scheduler_largest_batch", {"Most turns in one step.", double(sched.largest_batch)}});
      gauges.push_back({"keel_scheduler_preemptions", {"Turns paused for KV memory, since start.", double(sched.preemptions)}});
      gauges.push_back({"keel_warming", {"1 while --warm requests are still being prefilled.", state.warmup.warming() ? 1.0 : 0.0}});
      gauges.push_back({"keel_warmup_done", {"--warm requests prefilled.", double(state.warmup.done.load())}});
      gauges.push_back({"keel_warmup_failed", {"--warm requests that could not run.", double(state.warmup.failed.load())}});
      gauges.push_back({"keel_kv_used_tokens", {"Tokens of the live sequences.", double(state.kv_tokens.load())}});
      gauges.push_back({"keel_resident_bytes", {"Resident memory of the process.", double(resident_bytes())}});
      gauges.push_back({"keel_preparation_used_bytes",
                        {"Preparation budget held by requests being parsed and tokenized.",
                         double(state.preparation.used_bytes())}});
      gauges.push_back({"keel_preparation_waiting",
                        {"Requests waiting for preparation budget.", double(state.preparation.waiting())}});
      res.set_content(state.metrics.prometheus(gauges), "text/plain; version=0.0.4");
    });
  }
};

Server::Server(ServedModel& model, SessionCache& session, ServerOptions options)
    : impl_(std::make_unique<Impl>(model, session, std::move(options))) {}

Server::~Server() = default;

int Server::bind() {
  const auto& o = impl_->state.options;
  return impl_->http->listen(o.host, o.port);
}

void Server::warm(std::vector<WarmRequest> requests) { start_warmup(impl_->state, std::move(requests)); }

void Server::run() { impl_->http->run(); }

void Server::shutdown() {
  impl_->state.grace_ends = ServerState::Clock::now() + impl_->state.options.shutdown_grace;
  impl_->state.shutting_down = true;
  impl_->http->stop_accepting();
}

void Server::stop() { impl_->http->stop(); }

}  // namespace keel::api
