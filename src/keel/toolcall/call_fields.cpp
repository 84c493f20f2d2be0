// Helpers shared by the matchers: turning parsed JSON into a ParsedCall, and describing calls that
// did not parse or were cut off.
#include "keel/toolcall/call_matchers.h"
#include "keel/toolcall/json_scan.h"

namespace keel::toolcall::detail {

using nlohmann::ordered_json;

bool starts_with_at(std::string_view text, size_t pos, std::string_view word, bool& partial) {
  partial = false;
  if (pos > text.size()) return false;
  const std::string_view rest = text.substr(pos);
  if (rest.size() >= word.size()) return rest.substr(0, word.size()) == word;
  partial = word.substr(0, rest.size()) == rest;
  return false;
}

std::optional<ordered_json> parse_scanned_json(std::string_view text, std::string& problem) {
  try {
    return ordered_json::parse(text.begin(), text.end());
  } catch (const ordered_json::exception& e) {
    problem = std::string("arguments are not valid JSON: ") + e.what();
    return std::nullopt;
  }
}

std::optional<ParsedCall> call_from_json_object(const ordered_json& object, bool inside_call_marker) {
  if (!object.is_object()) return std::nullopt;
  // {"type": "function", "function": {"name": ..., "arguments": ...}}: the OpenAI wire shape,
  // which models trained on API logs sometimes write back.
  if (object.contains("function") && object["function"].is_object() && !object.contains("name")) {
    return call_from_json_object(object["function"], inside_call_marker);
  }
  auto name = object.find("name");
  if (name == object.end() || !name->is_string()) return std::nullopt;
  auto args = object.find("arguments");
  if (args == object.end()) args = object.find("parameters");
  ParsedCall call;
  call.name = name->get<std::string>();
  if (args == object.end()) {
    // Inside a call marker, {"name": ...} alone calls a tool without parameters. A bare object
    // needs its arguments key: plenty of ordinary JSON has a "name".
    if (!inside_call_marker || object.size() != 1) return std::nullopt;
    call.arguments = ordered_json::object();
    return call;
  }
  if (args->is_string()) {
    // Arguments as a JSON string (the OpenAI wire form).
    // Padded so a bare number counts as finished: this text will not grow.
    const std::string text = args->get_ref<const std::string&>() + " ";
    JsonScan scan = scan_json_value(text, 0);
    if (scan.status == JsonScan::Status::Complete && skip_json_space(text, scan.end) == text.size()) {
      std::string problem;
      if (auto parsed = parse_scanned_json(text, problem)) {
        call.arguments = std::move(*parsed);
      } else {
        call.problem = problem;
      }
    } else {
      call.problem = "arguments are not valid JSON: " +
                     (scan.status == JsonScan::Status::Invalid ? scan.error : std::string("the text ends early"));
    }
  } else {
    call.arguments = *args;
  }
  if (call.problem.empty() && !call.arguments.is_object()) {
    call.problem = std::string("arguments are not a JSON object but ") + call.arguments.type_name();
  }
  return call;
}

ParsedCall call_with_json_arguments(std::string name, std::string_view text) {
  ParsedCall call;
  call.name = std::move(name);
  const JsonScan scan = scan_json_value(text, 0);
  if (scan.status == JsonScan::Status::Invalid) {
    call.problem = "arguments are not valid JSON: " + scan.error;
  } else if (scan.status == JsonScan::Status::Incomplete) {
    call.problem = "arguments are not valid JSON: the text ends before the value does";
  } else if (skip_json_space(text, scan.end) != text.size()) {
    call.problem = "arguments are not valid JSON: unexpected text after the value at byte " + std::to_string(scan.end);
  } else if (auto parsed = parse_scanned_json(text, call.problem)) {
    call.arguments = std::move(*parsed);
    if (!call.arguments.is_object()) {
      call.problem = std::string("arguments are not a JSON object but ") + call.arguments.type_name();
    }
  }
  return call;
}

std::string name_from_partial_json(std::string_view text) {
  const size_t key = text.find("\"name\"");
  if (key == std::string_view::npos) return "";
  size_t i = skip_json_space(text, key + 6);
  if (i >= text.size() || text[i] != ':') return "";
  i = skip_json_space(text, i + 1);
  if (i >= text.size() || text[i] != '"') return "";
  const size_t end = text.find('"', i + 1);
  if (end == std::string_view::npos) return "";
  return std::string(text.substr(i + 1, end - i - 1));
}

ParsedCall truncated_call(std::string_view raw, std::string name) {
  ParsedCall call;
  call.name = std::move(name);
  call.raw = std::string(raw);
  call.truncated = true;
  call.problem = "the output ended inside the tool call";
  return call;
}

}  // namespace keel::toolcall::detail
