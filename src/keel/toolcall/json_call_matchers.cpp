// Calls written as plain JSON: the bare object any model may emit, Llama 3.x's <|python_tag|>,
// and Mistral's [TOOL_CALLS] in both its array form and its NAME[ARGS]{...} form.
#include <array>

#include "keel/toolcall/call_matchers.h"
#include "keel/toolcall/json_scan.h"

namespace keel::toolcall::detail {
namespace {

using nlohmann::ordered_json;

// A bare object is held back from the text only while its first key says it may be a call.
constexpr std::array<std::string_view, 5> kCallFirstKeys = {"\"name\"", "\"function\"", "\"type\"", "\"arguments\"",
                                                            "\"parameters\""};

enum class FirstKey { Unknown, CallLike, Other };

FirstKey first_key(std::string_view at) {
  const size_t i = skip_json_space(at, 1);
  if (i >= at.size()) return FirstKey::Unknown;
  if (at[i] != '"') return FirstKey::Other;
  const size_t end = at.find('"', i + 1);
  if (end == std::string_view::npos) {
    // Still inside the key: it may yet become one of the call keys.
    const std::string_view so_far = at.substr(i);
    for (std::string_view key : kCallFirstKeys) {
      if (key.substr(0, so_far.size()) == so_far) return FirstKey::Unknown;
    }
    return FirstKey::Other;
  }
  const std::string_view key = at.substr(i, end + 1 - i);
  for (std::string_view k : kCallFirstKeys) {
    if (k == key) return FirstKey::CallLike;
  }
  return FirstKey::Other;
}

ParsedCall problem_call(std::string_view raw, std::string problem, std::string name = "") {
  ParsedCall call;
  call.name = std::move(name);
  call.problem = std::move(problem);
  call.raw = std::string(raw);
  return call;
}

// A JSON object after a call marker (<|python_tag|>): it is a call whatever it holds.
Match json_call_after_marker(std::string_view at, size_t i, bool eof) {
  const JsonScan scan = scan_json_value(at, i);
  if (scan.status == JsonScan::Status::Incomplete) {
    return eof ? consumed(at.size(), {truncated_call(at, name_from_partial_json(at.substr(i)))}) : need_more();
  }
  if (scan.status == JsonScan::Status::Invalid) {
    return consumed(scan.end, {problem_call(at.substr(0, scan.end), "arguments are not valid JSON: " + scan.error,
                                            name_from_partial_json(at.substr(i, scan.end - i)))});
  }
  std::string problem;
  ParsedCall call;
  if (auto object = parse_scanned_json(at.substr(i, scan.end - i), problem)) {
    if (auto parsed = call_from_json_object(*object, true)) {
      call = std::move(*parsed);
    } else {
      call.problem = "the JSON is not {\"name\": ..., \"arguments\": {...}}";
    }
  } else {
    call.problem = problem;
  }
  call.raw = std::string(at.substr(0, scan.end));
  return consumed(scan.end, {std::move(call)});
}

bool is_name_byte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.' || c == ':';
}

Match mistral_array(std::string_view at, size_t i, bool eof) {
  const JsonScan scan = scan_json_value(at, i);
  if (scan.status == JsonScan::Status::Incomplete) {
    return eof ? consumed(at.size(), {truncated_call(at, name_from_partial_json(at.substr(i)))}) : need_more();
  }
  if (scan.status == JsonScan::Status::Invalid) {
    return consumed(scan.end, {problem_call(at.substr(0, scan.end), "tool calls are not valid JSON: " + scan.error,
                                            name_from_partial_json(at.substr(i, scan.end - i)))});
  }
  const std::string_view raw = at.substr(0, scan.end);
  std::string problem;
  auto array = parse_scanned_json(at.substr(i, scan.end - i), problem);
  if (!array) return consumed(scan.end, {problem_call(raw, problem)});
  std::vector<ParsedCall> calls;
  for (const ordered_json& element : *array) {
    std::optional<ParsedCall> call = call_from_json_object(element, true);
    if (!call) call = problem_call("", "an element of [TOOL_CALLS] is not {\"name\": ..., \"arguments\": {...}}");
    call->raw = std::string(raw);
    calls.push_back(std::move(*call));
  }
  if (calls.empty()) calls.push_back(problem_call(raw, "[TOOL_CALLS] holds an empty list"));
  return consumed(scan.end, std::move(calls));
}

}  // namespace

Match match_bare_json(std::string_view at, size_t, bool eof) {
  const JsonScan scan = scan_json_value(at, 0);
  if (scan.status == JsonScan::Status::Invalid) return not_call(1);
  if (scan.status == JsonScan::Status::Incomplete) {
    const FirstKey key = first_key(at);
    if (key == FirstKey::Other) return not_call(1);
    if (!eof) return need_more();
    const std::string name = name_from_partial_json(at);
    if (name.empty()) return not_call(1);
    return consumed(at.size(), {truncated_call(at, name)});
  }
  std::string problem;
  auto object = parse_scanned_json(at.substr(0, scan.end), problem);
  std::optional<ParsedCall> call = object ? call_from_json_object(*object, false) : std::nullopt;
  // Only the brace is released: the rest is scanned again as text, exactly as it would be had the
  // first key already shown (in an earlier piece) that this is no call.
  if (!call) return not_call(1);
  call->raw = std::string(at.substr(0, scan.end));
  return consumed(scan.end, {std::move(*call)});
}

Match match_python_tag(std::string_view at, size_t marker_size, bool eof) {
  const size_t i = skip_json_space(at, marker_size);
  if (i >= at.size()) return eof ? consumed(at.size()) : need_more();
  // <|python_tag|> also opens code for Llama's built-in tools; only JSON is a function call.
  if (at[i] != '{') return not_call(marker_size);
  return json_call_after_marker(at, i, eof);
}

Match match_mistral(std::string_view at, size_t marker_size, bool eof) {
  size_t i = skip_json_space(at, marker_size);
  auto cut = [&](std::string name) { return eof ? consumed(at.size(), {truncated_call(at, std::move(name))}) : need_more(); };
  if (i >= at.size()) return cut("");
  if (at[i] == '[') return mistral_array(at, i, eof);

  const size_t name_start = i;
  while (i < at.size() && is_name_byte(at[i])) ++i;
  std::string name(at.substr(name_start, i - name_start));
  if (i >= at.size()) return cut(name);
  bool partial = false;
  if (starts_with_at(at, i, "[CALL_ID]", partial)) {
    const size_t id_end = at.find('[', i + 9);
    if (id_end == std::string_view::npos) return cut(name);
    i = id_end;
  } else if (partial) {
    return cut(name);
  }
  if (!starts_with_at(at, i, "[ARGS]", partial)) {
    if (partial) return cut(name);
    return consumed(i, {problem_call(at.substr(0, i), "expected NAME[ARGS]{...} after [TOOL_CALLS]", name)});
  }
  if (name.empty()) {
    return consumed(i, {problem_call(at.substr(0, i), "[TOOL_CALLS] names no tool before [ARGS]")});
  }
  const size_t args = skip_json_space(at, i + 6);
  const JsonScan scan = scan_json_value(at, args);
  if (scan.status == JsonScan::Status::Incomplete) return cut(name);
  if (scan.status == JsonScan::Status::Invalid) {
    return consumed(scan.end, {problem_call(at.substr(0, scan.end), "arguments are not valid JSON: " + scan.error, name)});
  }
  ParsedCall call = call_with_json_arguments(name, at.substr(args, scan.end - args));
  call.raw = std::string(at.substr(0, scan.end));
  return consumed(scan.end, {std::move(call)});
}

}  // namespace keel::toolcall::detail
