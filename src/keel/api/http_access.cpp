#include "keel/api/http_access.h"

#include <algorithm>
#include <cctype>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "keel/util/error.h"

namespace keel::api {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

bool all_digits(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool reg_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
}

bool is_wildcard_address(std::string_view host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]";
}

// Client-supplied text in an error message: bounded, and quoted by the JSON encoder.
std::string shown(std::string_view text) {
  return text.size() <= 100 ? std::string(text) : std::string(text.substr(0, 100)) + "...";
}

// Request headers a preflight is always told it may send: the SDKs' own.
constexpr const char* kAllowedHeaders[] = {"content-type", "x-api-key", "authorization", "anthropic-version",
                                           "anthropic-beta", "anthropic-dangerous-direct-browser-access",
                                           "x-stainless-retry-count", "x-stainless-timeout"};

}  // namespace

std::optional<std::string> host_of(std::string_view header) {
  header = trim(header);
  if (header.empty()) return std::nullopt;
  std::string_view host, port;
  if (header.front() == '[') {
    const size_t close = header.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = header.substr(1, close - 1);
    std::string_view rest = header.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return std::nullopt;
      port = rest.substr(1);
    }
    in6_addr addr{};
    if (inet_pton(AF_INET6, std::string(host).c_str(), &addr) != 1) return std::nullopt;
  } else {
    const size_t colon = header.rfind(':');
    host = header.substr(0, colon);
    if (colon != std::string_view::npos) port = header.substr(colon + 1);
    if (host.empty() || !std::all_of(host.begin(), host.end(), reg_name_char)) return std::nullopt;
  }
  if (port.size() > 5 || !all_digits(port)) return std::nullopt;
  return lower(host);
}

bool is_loopback_host(std::string_view host) {
  if (host == "localhost") return true;
  constexpr std::string_view kSuffix = ".localhost";
  if (host.size() > kSuffix.size() && host.substr(host.size() - kSuffix.size()) == kSuffix) return true;
  const std::string text(host);
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

std::optional<std::string> normalize_origin(std::string_view origin) {
  origin = trim(origin);
  if (lower(origin) == "null") return "null";
  const size_t sep = origin.find("://");
  if (sep == std::string_view::npos || sep == 0) return std::nullopt;
  const std::string scheme = lower(origin.substr(0, sep));
  if (!std::all_of(scheme.begin(), scheme.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.'; }))
    return std::nullopt;
  std::string_view authority = origin.substr(sep + 3);
  if (!authority.empty() && authority.back() == '/') authority.remove_suffix(1);
  if (!host_of(authority) || authority != trim(authority)) return std::nullopt;
  std::string out = scheme + "://" + lower(authority);
  // Browsers leave the scheme's default port out of Origin.
  for (const auto& [s, port] : {std::pair{"http", ":80"}, std::pair{"https", ":443"}})
    if (scheme == s && out.size() > std::string_view(port).size() && out.ends_with(port) && out.back() != ']')
      out.resize(out.size() - std::string_view(port).size());
  return out;
}

bool is_json_media_type(std::string_view media_type) {
  const size_t semi = media_type.find(';');
  return lower(trim(media_type.substr(0, semi))) == "application/json";
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  const size_t n = std::max(a.size(), b.size());
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < n; ++i) {
    // Past the end of the shorter string, compare against 0 instead of stopping.
    const auto x = static_cast<unsigned char>(i < a.size() ? a[i] : 0);
    const auto y = static_cast<unsigned char>(i < b.size() ? b[i] : 0);
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

AccessRules::AccessRules(AccessOptions options) : keys_(std::move(options.api_keys)) {
  for (const auto& key : keys_)
    if (key.empty() || !std::all_of(key.begin(), key.end(), [](char c) { return c > 0x20 && c < 0x7f; }))
      throw Error("an API key must be printable ASCII without spaces (a header must carry it), and not empty");
  if (!is_wildcard_address(options.bound_host)) {
    std::string bound = options.bound_host;
    if (bound.find(':') != std::string::npos && bound.front() != '[') bound = "[" + bound + "]";
    if (auto h = host_of(bound)) hosts_.push_back(*h);
  }
  for (const auto& h : options.allowed_hosts) {
    if (h == "*") {
      any_host_ = true;
      continue;
    }
    auto host = host_of(h);
    if (!host) throw Error("--allow-host: '" + h + "' is not a host name or address (NAME, NAME:PORT or [IPv6])");
    hosts_.push_back(*host);
  }
  for (const auto& o : options.allowed_origins) {
    if (o == "*") {
      any_origin_ = true;
      continue;
    }
    auto origin = normalize_origin(o);
    if (!origin)
      throw Error("--allow-origin: '" + o + "' is not an origin: write it as the browser sends it, " +
                  "scheme://host[:port] (http://localhost:3000), or '*' for any");
    origins_.push_back(*origin);
  }
}

bool AccessRules::host_allowed(std::string_view host_header) const {
  const auto host = host_of(host_header);
  if (!host) return false;
  if (any_host_ || is_loopback_host(*host)) return true;
  return std::find(hosts_.begin(), hosts_.end(), *host) != hosts_.end();
}

bool AccessRules::origin_allowed(std::string_view origin) const {
  if (any_origin_) return true;
  const auto normalized = normalize_origin(origin);
  return normalized && std::find(origins_.begin(), origins_.end(), *normalized) != origins_.end();
}

std::optional<size_t> AccessRules::presented_key(const http::Request& req) const {
  if (keys_.empty()) return std::nullopt;
  const std::string x_api_key = req.header("x-api-key");
  const std::string authorization = req.header("Authorization");
  const bool bearer = authorization.size() >= 7 && lower(authorization.substr(0, 7)) == "bearer ";
  const std::string_view bearer_key = bearer ? std::string_view(authorization).substr(7) : std::string_view();
  // Every comparison runs, for both headers and all keys, so the time says nothing about which
  // header or key was close. Keys are never empty, so an absent header matches none.
  std::optional<size_t> found;
  for (size_t i = 0; i < keys_.size(); ++i) {
    const bool by_header = constant_time_equal(x_api_key, keys_[i]);
    const bool by_bearer = constant_time_equal(bearer_key, keys_[i]);
    if ((by_header || by_bearer) && !found) found = i;
  }
  return found;
}

std::optional<ApiError> AccessRules::refusal(const http::Request& req, bool needs_key, bool needs_json) const {
  const size_t hosts = req.header_count("Host");
  if (hosts > 1) return invalid_request("the request has more than one Host header");
  if (hosts == 0) {
    // HTTP/1.1 requires Host (RFC 9112 section 3.2). HTTP/1.0 predates it; browsers always send
    // one, so a request without it is not a page's and has nothing to rebind.
    if (req.version != "HTTP/1.0") return invalid_request("an HTTP/1.1 request must carry a Host header");
  } else {
    const std::string host = req.header("Host");
    if (!host_allowed(host)) {
      const auto name = host_of(host);
      return permission_denied("the Host \"" + shown(host) + "\" does not name this server: keel serve answers only " +
                               "requests addressed to localhost, a loopback address or the address it listens on " +
                               "(this blocks DNS rebinding); start it with --allow-host " +
                               (name ? shown(*name) : std::string("NAME")) + " to accept this name");
    }
  }
  const size_t origins = req.header_count("Origin");
  if (origins > 1) return permission_denied("the request has more than one Origin header");
  if (origins == 1 && !origin_allowed(req.header("Origin")))
    return permission_denied("requests from web pages are refused: the origin \"" + shown(req.header("Origin")) +
                             "\" is not allowed; start keel serve with --allow-origin " +
                             shown(req.header("Origin")) + " to let that site call it");
  if (needs_key && key_required() && !presents_key(req))
    return authentication_failed("missing or wrong API key: send it as x-api-key or Authorization: Bearer");
  if (needs_json && !is_json_media_type(req.header("Content-Type"))) {
    const std::string type = req.header("Content-Type");
    return unsupported_media_type("the request body must be JSON sent with Content-Type: application/json (got " +
                                  (type.empty() ? std::string("no Content-Type") : "\"" + shown(type) + "\"") + ")");
  }
  return std::nullopt;
}

void AccessRules::add_cors_headers(const http::Request& req, http::Response& res) const {
  if (req.header_count("Origin") != 1) return;
  const std::string origin = req.header("Origin");
  if (!origin_allowed(origin)) return;
  res.set_header("Access-Control-Allow-Origin", origin);
  res.set_header("Vary", "Origin");
  res.set_header("Access-Control-Expose-Headers", "request-id, x-request-id, x-keel-model");
}

void AccessRules::answer_options(const http::Request& req, http::Response& res) const {
  res.status = 204;
  res.set_header("Allow", "GET, POST, OPTIONS");
  if (!req.has_header("Origin")) return;
  res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
  // The origin is trusted (--allow-origin), so whatever else it asks to send is allowed too: the
  // SDKs add headers of their own (x-stainless-*) from release to release.
  std::vector<std::string> names(std::begin(kAllowedHeaders), std::end(kAllowedHeaders));
  const std::string requested = req.header("Access-Control-Request-Headers");
  size_t at = 0;
  while (at <= requested.size()) {
    const size_t comma = std::min(requested.find(',', at), requested.size());
    const std::string name = lower(trim(std::string_view(requested).substr(at, comma - at)));
    const bool token = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
    });
    if (token && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    at = comma + 1;
  }
  std::string allowed;
  for (const auto& n : names) allowed += (allowed.empty() ? "" : ", ") + n;
  res.set_header("Access-Control-Allow-Headers", allowed);
  res.set_header("Access-Control-Max-Age", "600");
  // Chrome's Private Network Access asks before a public page may reach a loopback address.
  if (lower(req.header("Access-Control-Request-Private-Network")) == "true")
    res.set_header("Access-Control-Allow-Private-Network", "true");
}

}  // namespace keel::api
