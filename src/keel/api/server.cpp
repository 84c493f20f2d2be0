#include "keel/api/server.h"

#include <cstdio>
#include <fstream>

#include <sys/socket.h>

#include "keel/api/server_state.h"
#include "keel/engine/served_model.h"
#include "keel/engine/session_cache.h"
#include "keel/util/error.h"

namespace keel::api {

void send_error(httplib::Response& res, Protocol protocol, const ApiError& error) {
  res.status = error_status(protocol, error);
  res.set_content(error_body(protocol, error), "application/json");
}

namespace {

// The OpenAI routes answer in OpenAI's envelope; everything else in Anthropic's.
Protocol protocol_of(const std::string& path) {
  return path.rfind("/v1/chat/", 0) == 0 || path == "/v1/completions" ? Protocol::OpenAI : Protocol::Anthropic;
}

bool authorized(const ServerState& s, const httplib::Request& req) {
  if (s.options.api_key.empty()) return true;
  if (req.get_header_value("x-api-key") == s.options.api_key) return true;
  const std::string auth = req.get_header_value("Authorization");
  return auth == "Bearer " + s.options.api_key;
}

int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return resident * 4096;
}

nlohmann::ordered_json kv_json(const ServerState& s) {
  const kv::KvPoolStats st = s.session.stats();
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
          {"prefix_cache", {{"hits", st.prefix_hits}, {"misses", st.prefix_misses}, {"hit_rate", st.hit_rate()},
                            {"reused_tokens", st.reused_tokens}, {"evictions", st.evictions}}},
          {"quantizations", st.quantizations},
          {"requantizations", st.requantizations}};
}

// Pool gauges for /metrics.
std::vector<std::pair<std::string, std::pair<std::string, double>>> kv_gauges(const ServerState& s) {
  const kv::KvPoolStats st = s.session.stats();
  std::vector<std::pair<std::string, std::pair<std::string, double>>> g = {
      {"keel_kv_budget_bytes", {"Bytes the KV pool may use.", double(st.budget_bytes)}},
      {"keel_kv_used_bytes", {"Bytes the KV pool uses, all formats.", double(st.used_bytes)}},
      {"keel_kv_blocks_free", {"Blocks the unused KV budget still holds.", double(st.blocks_free)}},
      {"keel_kv_blocks_cached", {"Blocks in the prefix cache.", double(st.blocks_cached)}},
      {"keel_kv_prefix_hit_rate", {"Share of requests that reused a cached prefix block.", st.hit_rate()}},
      {"keel_kv_evictions", {"Cached blocks freed to make room, since start.", double(st.evictions)}},
      {"keel_kv_requantizations", {"Blocks quantized twice (must stay 0).", double(st.requantizations)}},
  };
  for (KvFormat f : kAllKvFormats)
    g.push_back({"keel_kv_bytes_" + std::string(kv_format_name(f)),
                 {"Bytes of KV blocks stored as " + std::string(kv_format_name(f)) + ".", double(st.bytes(f))}});
  return g;
}

nlohmann::ordered_json health_json(const ServerState& s) {
  const bool busy = s.queue.busy();
  return {
      {"status", "ok"},
      {"model", s.registry.id()},
      {"path", s.model.dir().string()},
      {"aliases", s.registry.aliases()},
      {"any_name", s.registry.wildcard()},
      {"state", busy ? "generating" : "idle"},
      {"queue", {{"waiting", s.queue.waiting()}, {"running", busy ? 1 : 0}, {"max_waiting", s.queue.max_waiting()}}},
      {"tool_call_format", s.model.tool_call_format().name},
      {"memory",
       {{"weights_bytes", s.model.weights().weight_bytes_per_token()},
        {"resident_bytes", resident_bytes()}}},
      {"kv", kv_json(s)},
  };
}

nlohmann::ordered_json models_json(const ServerState& s) {
  nlohmann::ordered_json data = nlohmann::ordered_json::array();
  for (const auto& name : s.registry.names())
    data.push_back({{"type", "model"}, {"id", name}, {"object", "model"}, {"display_name", name},
                    {"created_at", "1970-01-01T00:00:00Z"}, {"created", 0}, {"owned_by", "keel"}});
  return {{"object", "list"}, {"data", data}, {"has_more", false},
          {"first_id", s.registry.id()}, {"last_id", s.registry.names().back()}};
}

}  // namespace

struct Server::Impl {
  ServerState state;
  httplib::Server http;
  int port = 0;
  int listen_fd = -1;

  Impl(ServedModel& model, SessionCache& session, ServerOptions options)
      : state{model, session, options, ModelRegistry(model.folder_name(), options.aliases), {},
              RequestQueue(options.queue_depth)} {
    // Every waiting client holds an HTTP thread (streams wait for their turn), so there are enough
    // threads for a full queue plus the running request and a few quick routes.
    const size_t threads = state.options.queue_depth + 8;
    http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http.set_payload_max_length(state.options.max_body_bytes);
    // The library listens with a backlog of 5; remember the socket so bind() can raise it.
    http.set_socket_options([this](socket_t sock) {
      httplib::default_socket_options(sock);
      listen_fd = sock;
    });
    http.set_keep_alive_max_count(1000);
    http.set_read_timeout(60, 0);
    http.set_write_timeout(60, 0);

    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      res.set_header("x-keel-model", state.model.dir().string());
      if (req.path == "/health" || authorized(state, req)) return httplib::Server::HandlerResponse::Unhandled;
      send_error(res, protocol_of(req.path),
                 authentication_failed("missing or wrong API key: send it as x-api-key or Authorization: Bearer"));
      state.metrics.count_response(req.path, res.status);
      return httplib::Server::HandlerResponse::Handled;
    });
    http.Post("/v1/messages", [this](const httplib::Request& req, httplib::Response& res) {
      handle_chat(state, Protocol::Anthropic, req, res);
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      handle_chat(state, Protocol::OpenAI, req, res);
    });
    http.Post("/v1/messages/count_tokens", [this](const httplib::Request& req, httplib::Response& res) {
      handle_count_tokens(state, req, res);
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(models_json(state).dump(), "application/json");
      state.metrics.count_response("/v1/models", 200);
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(health_json(state).dump(), "application/json");
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      auto gauges = kv_gauges(state);
      gauges.push_back({"keel_queue_waiting", {"Requests waiting for the engine.", double(state.queue.waiting())}});
      gauges.push_back({"keel_queue_running", {"Requests the engine is running.", state.queue.busy() ? 1.0 : 0.0}});
      gauges.push_back({"keel_kv_used_tokens", {"Tokens of the live sequence.", double(state.kv_tokens.load())}});
      gauges.push_back({"keel_resident_bytes", {"Resident memory of the process.", double(resident_bytes())}});
      res.set_content(state.metrics.prometheus(gauges), "text/plain; version=0.0.4");
    });
    // Unknown routes, oversized bodies and anything httplib answers by itself get a JSON envelope.
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      const Protocol p = protocol_of(req.path);
      if (res.status == 404) {
        send_error(res, p, not_found("no route " + req.method + " " + req.path));
      } else if (res.status == 413) {
        send_error(res, p, request_too_large("the request body is larger than " +
                                             std::to_string(state.options.max_body_bytes) + " bytes"));
      } else {
        const int status = res.status;
        send_error(res, p, ApiError(status, status >= 500 ? "api_error" : "invalid_request_error",
                                    "HTTP " + std::to_string(status)));
      }
      state.metrics.count_response(req.path, res.status);
    });
    http.set_exception_handler([this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "internal error";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      send_error(res, protocol_of(req.path), internal_error(what));
    });
  }
};

Server::Server(ServedModel& model, SessionCache& session, ServerOptions options)
    : impl_(std::make_unique<Impl>(model, session, std::move(options))) {}

Server::~Server() = default;

int Server::bind() {
  const auto& o = impl_->state.options;
  impl_->port = o.port == 0 ? impl_->http.bind_to_any_port(o.host) : (impl_->http.bind_to_port(o.host, o.port) ? o.port : -1);
  if (impl_->port < 0) throw Error("cannot listen on " + o.host + ":" + std::to_string(o.port) + " (in use, or not an address of this machine)");
  // Many agents (or one agent's parallel tool runs) connect at once: a backlog of 5 would drop
  // their connections. Listening again on a listening socket only changes its backlog.
  if (impl_->listen_fd >= 0) ::listen(impl_->listen_fd, SOMAXCONN);
  return impl_->port;
}

void Server::run() { impl_->http.listen_after_bind(); }

void Server::stop() { impl_->http.stop(); }

}  // namespace keel::api
