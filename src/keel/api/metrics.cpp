#include "keel/api/metrics.h"

#include <cstdio>

namespace keel::api {
namespace {

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void family(std::string& out, const std::string& name, const char* type, const std::string& help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

// A label value as the exposition format quotes it: a quote, backslash or newline in it can never
// end the sample or start another line.
std::string label_value(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void sample(std::string& out, const std::string& name, double value, const std::string& labels = "") {
  out += name + (labels.empty() ? "" : "{" + labels + "}") + " " + number(value) + "\n";
}

}  // namespace

void Metrics::count_response(const std::string& route, int status) {
  std::lock_guard lock(mutex_);
  ++responses_[{route, status}];
}

void Metrics::count_turn(const TurnCounts& t) {
  std::lock_guard lock(mutex_);
  ++turns_;
  totals_.prompt_tokens += t.prompt_tokens;
  totals_.cached_tokens += t.cached_tokens;
  totals_.output_tokens += t.output_tokens;
  totals_.valid_calls += t.valid_calls;
  totals_.invalid_calls += t.invalid_calls;
  totals_.retried_calls += t.retried_calls;
  if (t.cached_tokens > 0) {
    ++prefix_hits_;
  } else if (t.prompt_tokens > 0) {
    ++prefix_misses_;
  }
  first_token_.sum += t.first_token_seconds;
  ++first_token_.count;
  duration_.sum += t.total_seconds;
  ++duration_.count;
}

PrefixCounts Metrics::prefix() const {
  std::lock_guard lock(mutex_);
  return {prefix_hits_, prefix_misses_, totals_.cached_tokens};
}

std::string Metrics::prometheus(
    const std::vector<std::pair<std::string, std::pair<std::string, double>>>& gauges) const {
  std::lock_guard lock(mutex_);
  std::string out;
  family(out, "keel_http_responses_total", "counter", "HTTP responses by route and status.");
  for (const auto& [key, n] : responses_)
    sample(out, "keel_http_responses_total", static_cast<double>(n),
           "route=\"" + label_value(key.first) + "\",status=\"" + std::to_string(key.second) + "\"");

  family(out, "keel_generations_total", "counter", "Chat turns the engine ran.");
  sample(out, "keel_generations_total", static_cast<double>(turns_));
  family(out, "keel_tokens_total", "counter", "Tokens by kind: prompt, cached (prompt tokens reused from the prefix cache), output.");
  sample(out, "keel_tokens_total", static_cast<double>(totals_.prompt_tokens), "kind=\"prompt\"");
  sample(out, "keel_tokens_total", static_cast<double>(totals_.cached_tokens), "kind=\"cached\"");
  sample(out, "keel_tokens_total", static_cast<double>(totals_.output_tokens), "kind=\"output\"");
  family(out, "keel_tool_calls_total", "counter", "Tool calls: valid (passed on), invalid (still invalid after retries), retried.");
  sample(out, "keel_tool_calls_total", static_cast<double>(totals_.valid_calls), "result=\"valid\"");
  sample(out, "keel_tool_calls_total", static_cast<double>(totals_.invalid_calls), "result=\"invalid\"");
  sample(out, "keel_tool_calls_total", static_cast<double>(totals_.retried_calls), "result=\"retried\"");
  family(out, "keel_prefix_cache_hits_total", "counter", "Turns that reused a cached prefix.");
  sample(out, "keel_prefix_cache_hits_total", static_cast<double>(prefix_hits_));
  family(out, "keel_prefix_cache_misses_total", "counter", "Turns that prefilled their whole prompt.");
  sample(out, "keel_prefix_cache_misses_total", static_cast<double>(prefix_misses_));
  family(out, "keel_prefix_cache_hit_rate", "gauge", "Share of turns that reused a cached prefix.");
  sample(out, "keel_prefix_cache_hit_rate", PrefixCounts{prefix_hits_, prefix_misses_, 0}.hit_rate());
  family(out, "keel_time_to_first_token_seconds", "summary", "Time from the start of a turn to its first token.");
  sample(out, "keel_time_to_first_token_seconds_sum", first_token_.sum);
  sample(out, "keel_time_to_first_token_seconds_count", static_cast<double>(first_token_.count));
  family(out, "keel_generation_duration_seconds", "summary", "Engine time per turn, prefill and decode.");
  sample(out, "keel_generation_duration_seconds_sum", duration_.sum);
  sample(out, "keel_generation_duration_seconds_count", static_cast<double>(duration_.count));
  for (const auto& [name, g] : gauges) {
    family(out, name, "gauge", g.first);
    sample(out, name, g.second);
  }
  return out;
}

}  // namespace keel::api
