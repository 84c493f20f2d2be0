#pragma once
// Who may talk to `keel serve`. A server on localhost is reachable from every web page the user
// opens: a page can POST to it (a "simple" cross-site request needs no preflight) and, through DNS
// rebinding, even read its answers. These rules refuse both before any route runs:
//   - the Host header must name this server: localhost, *.localhost, a 127.0.0.0/8 or ::1 literal,
//     the address it listens on, or a name given with --allow-host (ports are not compared);
//   - a request with an Origin header (a browser's, cross-site or not) must come from an origin
//     given with --allow-origin;
//   - the API keys, when any are set, are each compared in constant time;
//   - POST bodies must be declared application/json (no simple request can send that type).
// docs/serve.md ("Security model") is the user-facing description. Everything here is immutable
// after construction: any HTTP worker (or the I/O thread, for refusals) may call it.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "keel/http/http_server.h"

#include "keel/api/api_error.h"

namespace keel::api {

// The host part of a Host header value ("Name:8080" -> "name", "[::1]:4000" -> "::1"), lowercased;
// nullopt when it is not a host[:port] at all.
std::optional<std::string> host_of(std::string_view host_header);
// localhost, *.localhost (RFC 6761: never resolved through DNS, so they cannot be rebound),
// 127.0.0.0/8 and ::1 (also as ::ffff:127.x.y.z). `host` as host_of returns it.
bool is_loopback_host(std::string_view host);
// "http://App.example:3000/" -> "http://app.example:3000": the form browsers send; nullopt when
// `origin` is not scheme://host[:port] (or "null", which opaque origins send).
std::optional<std::string> normalize_origin(std::string_view origin);
// True when `media_type` is application/json, parameters (charset) allowed, any case.
bool is_json_media_type(std::string_view media_type);
// Compares without exiting early on the first differing byte or on a length mismatch: the time
// depends on the longer length only, never on where the strings differ.
bool constant_time_equal(std::string_view a, std::string_view b);

struct AccessOptions {
  std::string bound_host;                   // --host: its own name/address is always allowed
  std::vector<std::string> allowed_hosts;   // --allow-host, "*" for any
  std::vector<std::string> allowed_origins;  // --allow-origin, "*" for any
  std::vector<std::string> api_keys;        // empty: no key; several: any one of them
};

class AccessRules {
 public:
  // Throws keel::Error naming an --allow-host or --allow-origin value that cannot match anything,
  // or an API key no header can carry (empty, or not printable ASCII).
  explicit AccessRules(AccessOptions options);

  bool host_allowed(std::string_view host_header) const;
  bool origin_allowed(std::string_view origin) const;
  // Which key the request presents (x-api-key or Authorization: Bearer), as its index in
  // api_keys; nullopt when none is set or none matches. Every key is compared, whole, whatever
  // matched, so the time says nothing about which key came close.
  std::optional<size_t> presented_key(const http::Request& req) const;
  bool presents_key(const http::Request& req) const { return presented_key(req).has_value(); }
  bool key_required() const { return !keys_.empty(); }
  size_t key_count() const { return keys_.size(); }

  // Why `req` is refused, in the order the rules are checked (Host, Origin, key, content type):
  // 400 (HTTP/1.1 without Host, Host repeated), 403 permission_error, 401, 415. nullopt: admitted.
  // `needs_key`: false for /health and preflights; `needs_json`: POST routes.
  std::optional<ApiError> refusal(const http::Request& req, bool needs_key, bool needs_json) const;

  // For a request from an allowed origin: Access-Control-Allow-Origin and friends on its answer.
  void add_cors_headers(const http::Request& req, http::Response& res) const;
  // The answer to OPTIONS once refusal() has admitted it: a CORS preflight answer when the request
  // has an Origin, else just the methods. Status 204.
  void answer_options(const http::Request& req, http::Response& res) const;

 private:
  std::vector<std::string> hosts_;    // host parts, lowercased
  std::vector<std::string> origins_;  // normalized
  bool any_host_ = false;
  bool any_origin_ = false;
  std::vector<std::string> keys_;
};

}  // namespace keel::api
