// DeepSeek V3: <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>
// DeepSeek V3.1: <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>
// The surrounding <｜tool▁calls▁begin｜> / <｜tool▁calls▁end｜> are syntax markers of their own, so
// each call is emitted as soon as it closes.
#include "keel/toolcall/call_matchers.h"
#include "keel/toolcall/json_scan.h"

namespace keel::toolcall::detail {
namespace {

constexpr std::string_view kSep = "<｜tool▁sep｜>";
constexpr std::string_view kCallEnd = "<｜tool▁call▁end｜>";
constexpr size_t kMaxHeadBytes = 256;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\n' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

Match problem_until_end(std::string_view at, size_t from, std::string problem, std::string name, bool eof) {
  const size_t k = at.find(kCallEnd, from);
  if (k == std::string_view::npos) {
    if (!eof) return need_more();
    ParsedCall call = truncated_call(at, std::move(name));
    call.problem += "; " + problem;
    return consumed(at.size(), {std::move(call)});
  }
  ParsedCall call;
  call.name = std::move(name);
  call.problem = std::move(problem);
  call.raw = std::string(at.substr(0, k + kCallEnd.size()));
  return consumed(k + kCallEnd.size(), {std::move(call)});
}

}  // namespace

Match match_deepseek_call(std::string_view at, size_t marker_size, bool eof) {
  auto cut = [&](std::string name) { return eof ? consumed(at.size(), {truncated_call(at, std::move(name))}) : need_more(); };
  const size_t sep = at.find(kSep, marker_size);
  if (sep == std::string_view::npos || sep - marker_size > kMaxHeadBytes) {
    // Decided only once any separator starting within the limit would be wholly in view.
    if (at.size() - marker_size > kMaxHeadBytes + kSep.size()) {
      return problem_until_end(at, marker_size, "no <｜tool▁sep｜> after <｜tool▁call▁begin｜>", "", eof);
    }
    return cut("");
  }
  const std::string_view head = trim(at.substr(marker_size, sep - marker_size));
  size_t i = sep + kSep.size();
  std::string name;
  if (head == "function") {
    // V3: the name runs to the end of the line, then a ```json fence holds the arguments.
    const size_t nl = at.find('\n', i);
    if (nl == std::string_view::npos ? at.size() - i > kMaxHeadBytes : nl - i > kMaxHeadBytes) {
      return problem_until_end(at, i, "no newline after the tool name", "", eof);
    }
    if (nl == std::string_view::npos) return cut(std::string(trim(at.substr(i))));
    name = std::string(trim(at.substr(i, nl - i)));
    i = skip_json_space(at, nl);
    bool partial = false;
    if (starts_with_at(at, i, "```json", partial)) {
      i += 7;
    } else if (partial) {
      return cut(name);
    } else if (starts_with_at(at, i, "```", partial)) {
      i += 3;
    }
  } else {
    name = std::string(head);
  }
  const size_t args = skip_json_space(at, i);
  const JsonScan scan = scan_json_value(at, args);
  if (scan.status == JsonScan::Status::Incomplete) return cut(name);
  if (scan.status == JsonScan::Status::Invalid) {
    return problem_until_end(at, args, "arguments are not valid JSON: " + scan.error, name, eof);
  }
  size_t k = skip_json_space(at, scan.end);
  bool partial = false;
  if (starts_with_at(at, k, "```", partial)) {
    k = skip_json_space(at, k + 3);
  } else if (partial && !eof) {
    return need_more();
  }
  size_t end = scan.end;
  if (starts_with_at(at, k, kCallEnd, partial)) {
    end = k + kCallEnd.size();
  } else if (k >= at.size() || partial) {
    if (!eof) return need_more();
    end = at.size();
  }
  ParsedCall call = call_with_json_arguments(name, at.substr(args, scan.end - args));
  if (call.name.empty() && call.problem.empty()) call.problem = "the call names no tool";
  call.raw = std::string(at.substr(0, end));
  return consumed(end, {std::move(call)});
}

}  // namespace keel::toolcall::detail
