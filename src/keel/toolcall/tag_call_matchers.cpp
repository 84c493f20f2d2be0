// <tool_call>...</tool_call> (Hermes, Qwen2.5, Qwen3: a JSON body) and Qwen3-Coder's XML body
// <function=NAME><parameter=K>V</parameter></function>. Both formats accept both bodies: Qwen3
// models fine-tuned on the other style mix them.
#include "keel/toolcall/call_matchers.h"
#include "keel/toolcall/json_scan.h"

namespace keel::toolcall::detail {
namespace {

constexpr std::string_view kCloseCall = "</tool_call>";
constexpr std::string_view kFunction = "<function=";
constexpr std::string_view kCloseFunction = "</function>";
constexpr std::string_view kParameter = "<parameter=";
constexpr std::string_view kCloseParameter = "</parameter>";
// A function or parameter name longer than this is not a name: the text is not a call.
constexpr size_t kMaxNameBytes = 256;

struct NameRead {
  enum class Status { Done, Short, Bad } status;
  std::string name;
  size_t end = 0;  // after the '>'
};

// NAME> starting at i.
NameRead read_tag_name(std::string_view at, size_t i) {
  for (size_t k = i; k < at.size(); ++k) {
    const char c = at[k];
    if (c == '>') {
      std::string_view name = at.substr(i, k - i);
      while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.remove_suffix(1);
      if (name.empty()) return {NameRead::Status::Bad, "", k};
      return {NameRead::Status::Done, std::string(name), k + 1};
    }
    if (c == '\n' || c == '<' || k - i >= kMaxNameBytes) return {NameRead::Status::Bad, "", k};
  }
  return {NameRead::Status::Short, "", at.size()};
}

// XML parameter values carry one newline after the opening tag and one before the closing tag.
std::string strip_one_newline_each_side(std::string_view v) {
  if (!v.empty() && v.front() == '\n') v.remove_prefix(1);
  if (!v.empty() && v.back() == '\n') v.remove_suffix(1);
  return std::string(v);
}

// Where a parameter value that starts at v ends: at a </parameter> followed by the next
// parameter, the end of the function or the end of the call. A </parameter> followed by anything
// else is part of the value (a file being written may well contain one).
// Returns npos while that cannot be known yet.
size_t find_value_end(std::string_view at, size_t v, bool wrapped, bool eof, bool& need_more) {
  need_more = false;
  for (size_t k = at.find(kCloseParameter, v); k != std::string_view::npos; k = at.find(kCloseParameter, k + 1)) {
    const size_t after = skip_json_space(at, k + kCloseParameter.size());
    if (after >= at.size()) {
      if (eof) return k;
      need_more = true;
      return std::string_view::npos;
    }
    bool any_partial = false;
    for (std::string_view next : {kParameter, kCloseFunction, wrapped ? kCloseCall : kCloseFunction}) {
      bool partial = false;
      if (starts_with_at(at, after, next, partial)) return k;
      any_partial = any_partial || partial;
    }
    if (any_partial && !eof) {
      need_more = true;
      return std::string_view::npos;
    }
  }
  need_more = !eof;
  return std::string_view::npos;
}

// A call whose body could not be read: it runs to the closing marker, if one comes. Without a
// name, one is looked for in the JSON-ish body, never past the call's end: text after it has not
// necessarily arrived yet, and the result must not depend on that.
Match malformed_until(std::string_view at, size_t from, std::string_view close, std::string problem,
                      std::string name, bool eof) {
  const size_t k = at.find(close, from);
  if (k == std::string_view::npos) {
    if (!eof) return need_more();
    if (name.empty()) name = name_from_partial_json(at.substr(from));
    ParsedCall call = truncated_call(at, std::move(name));
    call.problem += "; " + problem;
    return consumed(at.size(), {std::move(call)});
  }
  ParsedCall call;
  call.name = name.empty() ? name_from_partial_json(at.substr(from, k - from)) : std::move(name);
  call.problem = std::move(problem);
  call.raw = std::string(at.substr(0, k + close.size()));
  return consumed(k + close.size(), {std::move(call)});
}

// <function=NAME>...</function> starting at `i`, wrapped in <tool_call> or not.
Match match_xml_function(std::string_view at, size_t i, bool wrapped, bool eof) {
  const std::string_view close = wrapped ? kCloseCall : kCloseFunction;
  NameRead fn = read_tag_name(at, i + kFunction.size());
  if (fn.status == NameRead::Status::Short) return eof ? consumed(at.size(), {truncated_call(at)}) : need_more();
  if (fn.status == NameRead::Status::Bad) {
    return malformed_until(at, i, close, "the <function=...> tag has no valid name", "", eof);
  }
  auto cut = [&] { return eof ? consumed(at.size(), {truncated_call(at, fn.name)}) : need_more(); };

  nlohmann::ordered_json args = nlohmann::ordered_json::object();
  size_t pos = fn.end;
  while (true) {
    pos = skip_json_space(at, pos);
    if (pos >= at.size()) return cut();
    bool partial_param = false, partial_close = false;
    if (starts_with_at(at, pos, kParameter, partial_param)) {
      NameRead key = read_tag_name(at, pos + kParameter.size());
      if (key.status == NameRead::Status::Short) return cut();
      if (key.status == NameRead::Status::Bad) {
        return malformed_until(at, pos, close, "a <parameter=...> tag has no valid name", fn.name, eof);
      }
      bool wait = false;
      const size_t end = find_value_end(at, key.end, wrapped, eof, wait);
      if (end == std::string_view::npos) return wait ? need_more() : cut();
      args[key.name] = strip_one_newline_each_side(at.substr(key.end, end - key.end));
      pos = end + kCloseParameter.size();
      continue;
    }
    if (starts_with_at(at, pos, kCloseFunction, partial_close)) {
      pos += kCloseFunction.size();
      break;
    }
    if (partial_param || partial_close) return cut();
    return malformed_until(at, pos, close,
                           "unexpected text inside <function=" + fn.name + "> at byte " + std::to_string(pos), fn.name,
                           eof);
  }

  size_t end = pos;
  if (wrapped) {
    const size_t j = skip_json_space(at, pos);
    bool partial = false;
    if (starts_with_at(at, j, kCloseCall, partial)) {
      end = j + kCloseCall.size();
    } else if (j >= at.size() || partial) {
      if (!eof) return need_more();
      end = at.size();  // the model stopped before closing the wrapper; the call itself is whole
    }
  }
  ParsedCall call;
  call.name = fn.name;
  call.arguments = std::move(args);
  call.arguments_are_strings = true;
  call.raw = std::string(at.substr(0, end));
  return consumed(end, {std::move(call)});
}

Match match_json_body(std::string_view at, size_t i, bool eof) {
  const JsonScan scan = scan_json_value(at, i);
  if (scan.status == JsonScan::Status::Incomplete) {
    return eof ? consumed(at.size(), {truncated_call(at, name_from_partial_json(at.substr(i)))}) : need_more();
  }
  if (scan.status == JsonScan::Status::Invalid) {
    return malformed_until(at, i, kCloseCall, "arguments are not valid JSON: " + scan.error, "", eof);
  }
  const size_t j = skip_json_space(at, scan.end);
  size_t end = scan.end;  // no closing tag after the JSON: the call ends with it
  bool partial = false;
  if (starts_with_at(at, j, kCloseCall, partial)) {
    end = j + kCloseCall.size();
  } else if (j >= at.size() || partial) {
    if (!eof) return need_more();
    end = at.size();
  }
  ParsedCall call;
  std::string problem;
  if (auto object = parse_scanned_json(at.substr(i, scan.end - i), problem)) {
    if (auto parsed = call_from_json_object(*object, true)) {
      call = std::move(*parsed);
    } else {
      call.problem = "the JSON in <tool_call> is not {\"name\": ..., \"arguments\": {...}}";
    }
  } else {
    call.problem = problem;
  }
  call.raw = std::string(at.substr(0, end));
  return consumed(end, {std::move(call)});
}

}  // namespace

Match match_tool_call_tag(std::string_view at, size_t marker_size, bool eof) {
  const size_t i = skip_json_space(at, marker_size);
  if (i >= at.size()) return eof ? consumed(at.size(), {truncated_call(at)}) : need_more();
  if (at[i] == '{') return match_json_body(at, i, eof);
  bool partial = false;
  if (starts_with_at(at, i, kFunction, partial)) return match_xml_function(at, i, true, eof);
  if (partial) return eof ? consumed(at.size(), {truncated_call(at)}) : need_more();
  return malformed_until(at, i, kCloseCall, "the call is neither JSON nor <function=...>", "", eof);
}

Match match_bare_xml_function(std::string_view at, size_t marker_size, bool eof) {
  // Without the wrapper, "<function=" followed by no name is prose, not a call.
  if (read_tag_name(at, marker_size).status == NameRead::Status::Bad) return not_call(marker_size);
  return match_xml_function(at, 0, false, eof);
}

}  // namespace keel::toolcall::detail
